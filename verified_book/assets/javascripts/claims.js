/* The verified book: place a figure's panel where it can be read, open it on tap or with
   Enter, load the other machines' rows of a page's panels as one opens, load and filter the
   claims x machines matrix, mark boxes that scroll sideways, and copy a selection as the text
   the page prints. Without this script the panels still open on
   hover and focus (CSS), anchored below the figure.

   The listeners on the document are set once; what belongs to a page (the matrix, the
   scrolling boxes) is set up once the document is loaded, and again on every page that
   Material's instant navigation brings (its `document$` observable emits then). */
(function () {
  "use strict";

  var MARGIN = 8;
  var GAP = 4;  /* between a figure and its panel */
  var SCROLLERS = [
    ".vb-scroll",
    ".vb-matrix__scroll",
    ".md-typeset__scrollwrap",
    ".md-typeset table:not([class])",
    ".md-typeset pre > code",
    ".md-typeset div.arithmatex",
    ".md-typeset .tabbed-labels"
  ].join(", ");

  /* A panel is placed below its figure, or above where only there it fits whole, and never over
     the figure (a tap lands on what is under the finger once the panel shows). Where it fits on
     neither side (a phone's short screen, a tall panel), a panel the reader opened (`reveal`: a
     tap, a click, Enter) scrolls the page until it fits below the figure, the figure kept clear
     of the header; one only hovered or still too tall takes the roomier side and scrolls inside
     itself. So an open panel is always inside the viewport. */
  function place(fig, reveal) {
    var panel = fig.querySelector(".vb-panel");
    if (!panel) {
      return;
    }
    panel.style.maxHeight = "";
    panel.style.overflowY = "";
    var width = document.documentElement.clientWidth;
    var height = window.innerHeight;
    var w = panel.offsetWidth;
    var h = panel.offsetHeight;
    var box = fig.getBoundingClientRect();
    var below = height - box.bottom - GAP - MARGIN;
    var above = box.top - GAP - MARGIN;
    if (reveal && h > below && h > above) {
      var header = document.querySelector(".md-header");
      var clear = (header ? header.getBoundingClientRect().bottom : 0) + MARGIN;
      var by = Math.min(h - below, box.top - clear);
      if (by > 0) {
        window.scrollBy(0, by);
        box = fig.getBoundingClientRect();
        below = height - box.bottom - GAP - MARGIN;
        above = box.top - GAP - MARGIN;
      }
    }
    var up = h > below && (h <= above || above > below);
    if (h > (up ? above : below)) {
      h = Math.max(up ? above : below, 0);
      panel.style.maxHeight = h + "px";
      panel.style.overflowY = "auto";
    }
    panel.classList.toggle("vb-above", up);
    panel.style.left = Math.max(MARGIN, Math.min(box.left, width - w - MARGIN)) + "px";
    panel.style.top = (up ? box.top - GAP - h : box.bottom + GAP) + "px";
  }

  /* A panel holds the machine that decides its figure's mark; the other machines' rows are in a
     file beside the page, named by the panel's placeholder (data-vb-rows), which calls
     vbPanelRows with each panel's rows by its id. It is loaded as a script, the first time a
     reader opens a panel of the page: a page opened from disk may load a script but not fetch
     a file. Until it has (or where it cannot), the placeholder says where the rows are. */
  var ROWS = {};  /* panel id -> its other machines' rows (HTML written by the site build) */
  var ASKED = {};  /* data file address -> "loading" or "loaded" */
  var WAITING = {};  /* data file address -> what to run once it has loaded */
  var ARRIVING = {};  /* data file address -> its rows being unpacked */

  /* A data file hands its rows packed: JSON, compressed with gzip, in base64 (a fleet's rows repeat
     the same markup for every machine). The browser's own DecompressionStream unpacks them; the
     file has loaded once they are. A browser without one keeps the placeholder's words. */
  function unpacked(packed) {
    try {
      var bytes = Uint8Array.from(window.atob(packed), function (c) { return c.charCodeAt(0); });
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      return new Response(stream).text().then(JSON.parse);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  function arriving(packed, use) {
    var script = document.currentScript;
    var done = unpacked(packed).then(use);
    if (script && script.src) {
      ARRIVING[script.src] = done;
    }
  }

  window.vbPanelRows = function (packed) {
    arriving(packed, function (rows) {
      Object.keys(rows).forEach(function (id) { ROWS[id] = rows[id]; });
    });
  };

  function fillRows(root) {
    root.querySelectorAll(".vb-panel__more[data-vb-rows]").forEach(function (more) {
      var panel = more.closest(".vb-panel");
      if (panel && Object.prototype.hasOwnProperty.call(ROWS, panel.id)) {
        more.insertAdjacentHTML("beforebegin", ROWS[panel.id]);
        more.remove();
      }
    });
  }

  /* Load a data file (a script that hands its rows to a function of this one) once; `done` runs
     when it has, and again for each later ask of a file loaded already. A file that fails to load is
     asked for again the next time. */
  function loadScript(url, done) {
    if (ASKED[url] === "loaded") {
      done();
      return;
    }
    (WAITING[url] = WAITING[url] || []).push(done);
    if (ASKED[url]) {
      return;
    }
    ASKED[url] = "loading";
    var script = document.createElement("script");
    function failed() {
      delete ASKED[url];
      delete WAITING[url];
      script.remove();
    }
    script.src = url;
    script.onload = function () {
      var arrived = ARRIVING[script.src] || Promise.resolve();
      delete ARRIVING[script.src];
      arrived.then(function () {
        ASKED[url] = "loaded";
        var waiting = WAITING[url] || [];
        delete WAITING[url];
        waiting.forEach(function (callback) { callback(); });
      }, failed);
    };
    script.onerror = failed;
    document.head.appendChild(script);
  }

  function loadRows(fig) {
    var more = fig.querySelector(".vb-panel__more[data-vb-rows]");
    if (!more) {
      return;
    }
    loadScript(new URL(more.getAttribute("data-vb-rows"), document.baseURI).href, function () {
      fillRows(document);
      openFigures().forEach(function (open) { place(open); });
    });
  }

  function openFigures() {
    return document.querySelectorAll(".vb-fig.vb-open, .vb-fig:hover, .vb-fig:focus-within");
  }

  function setOpen(fig, open) {
    fig.classList.toggle("vb-open", open);
    fig.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      fig.classList.remove("vb-closed");
      loadRows(fig);
      place(fig, true);
    }
  }

  function closeAll(except) {
    document.querySelectorAll(".vb-fig.vb-open").forEach(function (fig) {
      if (fig !== except) {
        setOpen(fig, false);
      }
    });
  }

  function figureOf(target) {
    return target && target.closest ? target.closest(".vb-fig[data-claim]") : null;
  }

  /* A box that scrolls sideways says so: data-vb-more is "left", "right" or "left right"
     while there is more to see that way (claims.css fades that edge). */
  function markScroll(box) {
    var more = [];
    if (box.scrollWidth - box.clientWidth > 1) {
      if (box.scrollLeft > 1) {
        more.push("left");
      }
      if (box.scrollLeft + box.clientWidth < box.scrollWidth - 1) {
        more.push("right");
      }
      box.setAttribute("data-vb-scrolls", "");
    } else {
      box.removeAttribute("data-vb-scrolls");
    }
    if (more.length) {
      box.setAttribute("data-vb-more", more.join(" "));
    } else {
      box.removeAttribute("data-vb-more");
    }
  }

  function markScrollers(root) {
    root.querySelectorAll(SCROLLERS).forEach(markScroll);
  }

  function listen() {
    document.documentElement.classList.add("vb-js");

    document.addEventListener("pointerover", function (event) {
      var fig = figureOf(event.target);
      if (fig && !fig.contains(event.relatedTarget)) {
        fig.classList.remove("vb-closed");
        loadRows(fig);
        place(fig);
      }
    });
    document.addEventListener("focusin", function (event) {
      var fig = figureOf(event.target);
      if (fig) {
        fig.classList.remove("vb-closed");
        loadRows(fig);
        place(fig);
      }
    });
    document.addEventListener("click", function (event) {
      var fig = figureOf(event.target);
      if (fig && event.target.closest("a")) {
        return;
      }
      if (fig && !event.target.closest(".vb-panel") && selecting()) {
        return;  /* the end of a drag that selected text, not a tap on the figure */
      }
      closeAll(fig);
      if (fig && !event.target.closest(".vb-panel")) {
        setOpen(fig, !fig.classList.contains("vb-open"));
      }
    });
    document.addEventListener("keydown", function (event) {
      var fig = figureOf(document.activeElement) || figureOf(event.target);
      if ((event.key === "Enter" || event.key === " ") && fig && document.activeElement === fig) {
        event.preventDefault();
        closeAll(fig);
        if (fig.classList.contains("vb-open")) {
          setOpen(fig, false);
          fig.classList.add("vb-closed");
        } else {
          setOpen(fig, true);
        }
        return;
      }
      if (event.key !== "Escape") {
        return;
      }
      closeAll(null);
      if (fig) {
        fig.classList.add("vb-closed");
      }
    });
    window.addEventListener("scroll", function (event) {
      openFigures().forEach(function (fig) { place(fig); });
      var box = event.target;
      if (box && box.matches && box.matches(SCROLLERS)) {
        markScroll(box);
      }
    }, { capture: true, passive: true });
    document.addEventListener("copy", copySelection);
    window.addEventListener("resize", function () {
      openFigures().forEach(function (fig) { place(fig); });
      markScrollers(document);
    }, { passive: true });
  }

  function selecting() {
    var selection = window.getSelection ? window.getSelection() : null;
    return Boolean(selection && !selection.isCollapsed && selection.toString().trim());
  }

  /* What a selection copies: the text as printed, without what a figure adds to it (its
     panel, its mark, the words a screen reader hears). Inside a code or output block the
     lines stay as they are; elsewhere the browser's own layout of the text is kept. */
  var ADDED = ".vb-panel, .vb-fig__mark, .vb-sr";

  function printedText(range) {
    var holder = document.createElement("div");
    var start = range.startContainer.nodeType === 1 ? range.startContainer : range.startContainer.parentElement;
    var inCode = Boolean(start && start.closest("pre")) || Boolean(range.cloneContents().querySelector("pre"));
    holder.appendChild(range.cloneContents());
    holder.querySelectorAll(ADDED).forEach(function (node) { node.remove(); });
    if (inCode && !holder.querySelector("pre")) {
      return holder.textContent;
    }
    holder.style.cssText = "position:fixed;left:-99999px;top:0;white-space:" + (inCode ? "pre" : "normal");
    document.body.appendChild(holder);
    var text = holder.innerText;
    holder.remove();
    return text;
  }

  function copySelection(event) {
    var selection = window.getSelection();
    if (!selection || selection.isCollapsed || !event.clipboardData) {
      return;
    }
    var touched = false;
    for (var i = 0; i < selection.rangeCount; i += 1) {
      var fragment = selection.getRangeAt(i).cloneContents();
      if (fragment.querySelector(ADDED) || figureOf(selection.getRangeAt(i).commonAncestorContainer.parentElement)) {
        touched = true;
      }
    }
    if (!touched) {
      return;  /* nothing of a figure's in it: the browser copies as usual */
    }
    var parts = [];
    for (var j = 0; j < selection.rangeCount; j += 1) {
      parts.push(printedText(selection.getRangeAt(j)));
    }
    event.clipboardData.setData("text/plain", parts.join("\n"));
    event.preventDefault();
  }

  /* The claims x machines matrix holds its rows on the page, or (a course's matrix, every claim on
     every machine) names a data file for each chapter in data-vb-rows, each calling vbMatrixRows with
     its chapter's key and rows, packed; the rows of the chapter picked are loaded, of every chapter
     for "all chapters" (a claim printed in two chapters is in both files, and shown once). */
  var MATRIX = {};  /* chapter key -> its rows (HTML written by the site build) */

  window.vbMatrixRows = function (key, packed) {
    arriving(packed, function (rows) { MATRIX[key] = rows; });
  };

  function setupMatrix(matrix) {
    var chapter = matrix.querySelector('[data-vb-filter="chapter"]');
    var status = matrix.querySelector('[data-vb-filter="status"]');
    var count = matrix.querySelector("[data-vb-count]");
    var body = matrix.querySelector("tbody");
    var files = matrix.getAttribute("data-vb-rows") ? JSON.parse(matrix.getAttribute("data-vb-rows")) : null;
    var total = Number(matrix.getAttribute("data-vb-total")) || 0;
    var rows = body.querySelectorAll("tr");

    function apply() {
      var shown = 0;
      rows.forEach(function (row) {
        var chapters = (row.getAttribute("data-chapters") || "").split(" ");
        var statuses = (row.getAttribute("data-statuses") || "").split(" ");
        var ok = (!chapter.value || chapters.indexOf(chapter.value) >= 0) &&
                 (!status.value || statuses.indexOf(status.value) >= 0);
        row.hidden = !ok;
        if (ok) {
          shown += 1;
        }
      });
      var of = total || rows.length;
      if (count) {
        count.textContent = shown === of ? of + " claims" : shown + " of " + of + " claims";
      }
      markScrollers(matrix);
    }

    function fill(keys) {
      var seen = {};
      var found = [];
      keys.forEach(function (key) {
        var holder = document.createElement("tbody");
        holder.innerHTML = MATRIX[key] || "";
        Array.prototype.forEach.call(holder.children, function (row) {
          var claim = row.getAttribute("data-claim-row");
          if (!seen[claim]) {
            seen[claim] = true;
            found.push(row);
          }
        });
      });
      found.sort(function (a, b) {
        var x = a.getAttribute("data-claim-row");
        var y = b.getAttribute("data-claim-row");
        return x < y ? -1 : x > y ? 1 : 0;
      });
      var rowsFound = document.createDocumentFragment();
      found.forEach(function (row) { rowsFound.appendChild(row); });
      body.replaceChildren(rowsFound);
      rows = body.querySelectorAll("tr");
      var wait = matrix.querySelector("[data-vb-wait]");
      if (wait) {
        wait.hidden = true;
      }
      apply();
    }

    function wantedKeys() {
      return chapter.value ? [chapter.value] : Object.keys(files).sort();
    }

    function load() {
      if (!files) {
        apply();
        return;
      }
      var keys = wantedKeys();
      var wanted = keys.join(" ");
      var left = keys.filter(function (key) { return files[key]; });
      if (!left.length) {
        fill(keys);  /* no claim of this book is printed there */
        return;
      }
      left.slice().forEach(function (key) {
        loadScript(new URL(files[key], document.baseURI).href, function () {
          left.splice(left.indexOf(key), 1);
          if (!left.length && wantedKeys().join(" ") === wanted) {  /* not a choice the reader has left */
            fill(keys);
          }
        });
      });
    }

    chapter.addEventListener("change", load);
    status.addEventListener("change", apply);
    load();
  }

  /* What belongs to one page; runs again after each instant navigation. */
  function page() {
    document.querySelectorAll("[data-vb-matrix]:not([data-vb-ready])").forEach(function (matrix) {
      matrix.setAttribute("data-vb-ready", "");
      setupMatrix(matrix);
    });
    markScrollers(document);
    /* Math is typeset and fonts load after this runs: look again once they have. */
    window.setTimeout(function () { markScrollers(document); }, 400);
    if (document.fonts && document.fonts.ready) {
      document.fonts.ready.then(function () { markScrollers(document); });
    }
    document.documentElement.setAttribute("data-vb-page", location.pathname);
  }

  listen();
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", page);
  } else {
    page();
  }
  if (typeof window.document$ !== "undefined" && window.document$.subscribe) {
    window.document$.subscribe(page);
  }
})();
