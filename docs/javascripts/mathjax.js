// MathJax for pymdownx.arithmatex (generic mode): it wraps each formula in an element of
// class "arithmatex" with \( \) or \[ \] delimiters; only those elements are typeset.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*",
    processHtmlClass: "arithmatex",
  },
};

// Material's instant navigation swaps the page without reloading the scripts: typeset
// each new page once MathJax has started.
document$.subscribe(() => {
  if (window.MathJax.typesetPromise) {
    window.MathJax.typesetClear();
    window.MathJax.texReset();
    window.MathJax.typesetPromise();
  }
});
