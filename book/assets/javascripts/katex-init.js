/* Math on every page: KaTeX 0.19.1 shipped in assets/katex/ (MIT licence there), rendering
   the spans and divs that pymdownx.arithmatex (generic mode) marks with `arithmatex`.
   It typesets once the document is loaded, and again on each page Material's instant
   navigation brings (its `document$` emits then); a formula already typeset is left as is. */
(function () {
  "use strict";

  function typeset(root) {
    if (typeof renderMathInElement !== "function") {
      return;
    }
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      if (el.querySelector(".katex")) {
        return;
      }
      renderMathInElement(el, {
        delimiters: [
          { left: "\\(", right: "\\)", display: false },
          { left: "\\[", right: "\\]", display: true }
        ],
        throwOnError: false
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { typeset(document.body); });
  } else {
    typeset(document.body);
  }
  if (typeof document$ !== "undefined" && document$.subscribe) {
    document$.subscribe(function (doc) {
      typeset((doc && doc.body) || document.body);
    });
  }
})();
