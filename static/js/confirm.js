// Forms that undo something ask first: a form (or the button that submits it) with
// data-confirm="question" submits only after the person says yes (cancel a job, cancel a
// reservation). Without script, the form submits.
document.addEventListener("submit", (event) => {
  const asker = [event.submitter, event.target].find((element) => element && element.dataset && element.dataset.confirm);
  if (asker && !window.confirm(asker.dataset.confirm)) event.preventDefault();
});
