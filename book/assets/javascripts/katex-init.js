/* Math on every page: KaTeX 0.19.1 shipped in assets/katex/ (MIT licence there), rendering
   the spans and divs that pymdownx.arithmatex (generic mode) marks with `arithmatex`. */
(function () {
  "use strict";

  function typeset(root) {
    if (typeof renderMathInElement !== "function") {
      return;
    }
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      renderMathInElement(el, {
        delimiters: [
          { left: "\\(", right: "\\)", display: false },
          { left: "\\[", right: "\\]", display: true }
        ],
        throwOnError: false
      });
    });
  }

  if (typeof document$ !== "undefined" && document$.subscribe) {
    document$.subscribe(function (doc) {
      typeset((doc && doc.body) || document.body);
    });
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      typeset(document.body);
    });
  }
})();
