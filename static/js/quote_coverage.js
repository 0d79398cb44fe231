// A quote's money as a page prints it: to the cent, and "< $0.01" below a cent (the API's
// exact decimal string says the rest); `amount` is that string.
window.quoteMoney = function (amount) {
  const value = Number(amount);
  if (value > 0 && value < 0.005) return "< $0.01";
  return "$" + value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
};

// What the caller's plan hours and credits would cover of a quote (the quote API's
// `coverage`), in sentences that start with a space: plan hours first, as charging takes them,
// and what the caller would pay of it (`payable`, split as charging splits a run).
window.quoteCoverage = function (cover) {
  if (!cover) return "";
  const exact = cover.payable_exact !== undefined ? cover.payable_exact : cover.payable;
  const pay = cover.payable !== undefined ? ` You would pay at most ${window.quoteMoney(exact)}.` : "";
  if (!cover.gpu_seconds) return pay;
  const fromPlan = Math.min(cover.gpu_seconds, cover.plan_gpu_seconds_left);
  const fromCredits = Math.min(cover.gpu_seconds - fromPlan, cover.credit_gpu_seconds);
  const said = [];
  if (fromPlan) said.push(`${fromPlan.toLocaleString()} by your plan's included hours`);
  if (fromCredits) said.push(`${fromCredits.toLocaleString()} by your credits`);
  if (!said.length) return " Nothing of it is covered by your plan or credits." + pay;
  return ` Of its ${cover.gpu_seconds.toLocaleString()} GPU-seconds, ${said.join(" and ")}` +
    (cover.covered_gpu_seconds >= cover.gpu_seconds ? ": all covered." : "; the rest is billed.") + pay;
};
