// Forms that undo something ask first: a form with data-confirm="question" submits only after
// the person says yes (cancel a job, cancel a reservation). Without script, the form submits.
document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
