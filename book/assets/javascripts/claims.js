/* The verified book: place a figure's panel where it can be read, open it on tap, and
   filter the claims x machines matrix. Without this script the panels still open on hover
   and focus (CSS), anchored below the figure. */
(function () {
  "use strict";

  var MARGIN = 8;

  function place(fig) {
    var panel = fig.querySelector(".vb-panel");
    if (!panel) {
      return;
    }
    var box = fig.getBoundingClientRect();
    var width = document.documentElement.clientWidth;
    var height = window.innerHeight;
    var w = panel.offsetWidth;
    var h = panel.offsetHeight;
    var left = Math.max(MARGIN, Math.min(box.left, width - w - MARGIN));
    var top = box.bottom + 4;
    var above = top + h > height - MARGIN && box.top - h - 4 > MARGIN;
    if (above) {
      top = box.top - h - 4;
    }
    panel.classList.toggle("vb-above", above);
    panel.style.left = left + "px";
    panel.style.top = top + "px";
  }

  function openFigures() {
    return document.querySelectorAll(".vb-fig.vb-open, .vb-fig:hover, .vb-fig:focus-within");
  }

  function closeAll(except) {
    document.querySelectorAll(".vb-fig.vb-open").forEach(function (fig) {
      if (fig !== except) {
        fig.classList.remove("vb-open");
      }
    });
  }

  function figureOf(target) {
    return target && target.closest ? target.closest(".vb-fig[data-claim]") : null;
  }

  function setup() {
    document.documentElement.classList.add("vb-js");

    document.addEventListener("pointerover", function (event) {
      var fig = figureOf(event.target);
      if (fig && !fig.contains(event.relatedTarget)) {
        fig.classList.remove("vb-closed");
        place(fig);
      }
    });
    document.addEventListener("focusin", function (event) {
      var fig = figureOf(event.target);
      if (fig) {
        fig.classList.remove("vb-closed");
        place(fig);
      }
    });
    document.addEventListener("click", function (event) {
      var fig = figureOf(event.target);
      if (fig && event.target.closest("a")) {
        return;
      }
      closeAll(fig);
      if (fig && !event.target.closest(".vb-panel")) {
        fig.classList.toggle("vb-open");
        fig.classList.remove("vb-closed");
        place(fig);
      }
    });
    document.addEventListener("keydown", function (event) {
      if (event.key !== "Escape") {
        return;
      }
      var fig = figureOf(document.activeElement) || figureOf(event.target);
      closeAll(null);
      if (fig) {
        fig.classList.add("vb-closed");
      }
    });
    window.addEventListener("scroll", function () {
      openFigures().forEach(place);
    }, { capture: true, passive: true });
    window.addEventListener("resize", function () {
      openFigures().forEach(place);
    }, { passive: true });

    document.querySelectorAll("[data-vb-matrix]").forEach(setupMatrix);
  }

  function setupMatrix(matrix) {
    var chapter = matrix.querySelector('[data-vb-filter="chapter"]');
    var status = matrix.querySelector('[data-vb-filter="status"]');
    var count = matrix.querySelector("[data-vb-count]");
    var rows = matrix.querySelectorAll("tbody tr");

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
      if (count) {
        count.textContent = shown === rows.length ? rows.length + " claims" : shown + " of " + rows.length + " claims";
      }
    }

    chapter.addEventListener("change", apply);
    status.addEventListener("change", apply);
    apply();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
