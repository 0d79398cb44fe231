// The job form: what the job costs at most for its time limit, from POST /api/v1/billing/quote
// (the prices in force and the caller's plan), before it is submitted. The upper bound takes
// every GPU's whole memory for the whole time limit, and a GPU-memory request rounded up to
// whole shards, since that is the most metering can charge. The quote's `coverage` says how
// many of its GPU-seconds the caller's included plan hours and credits would cover.
(function () {
  "use strict";
  const out = document.querySelector("[data-job-quote]");
  const form = out && out.closest("form");
  if (!form) return;
  const field = (name) => form.querySelector(`[name="${name}"]`);
  const watched = ["gpu_type", "gpu_count", "gpu_memory_gb", "time_limit_minutes", "nvme_gb"];
  let timer = null;
  let inFlight = null;

  function wholeNumber(name) {
    const input = field(name);
    const text = input ? input.value.trim() : "";
    // Only plain digits: the form's own validation says what is wrong with anything else.
    return /^\d{1,9}$/.test(text) ? parseInt(text, 10) : null;
  }

  function request() {
    const select = field("gpu_type");
    const minutes = wholeNumber("time_limit_minutes");
    if (!select || !minutes) return null;
    const option = select.selectedOptions[0] || {};
    const memoryGb = parseInt((option.dataset || {}).memoryGb, 10) || 0;
    const shardGb = parseInt((option.dataset || {}).shardGb, 10) || 0;
    const count = wholeNumber("gpu_count");
    const memory = wholeNumber("gpu_memory_gb");
    const body = { gpu_type: select.value, seconds: minutes * 60, nvme_gb: wholeNumber("nvme_gb") || 0 };
    if (count) {
      body.gpu_count = count;
      body.gpu_memory_gb = count * memoryGb;
    } else if (memory) {
      body.gpu_count = 0;
      body.gpu_memory_gb = shardGb ? Math.ceil(memory / shardGb) * shardGb : memory;
    } else {
      return null;
    }
    return body;
  }

  function show(text) {
    out.textContent = text;
    out.hidden = !text;
  }

  function describe(quote) {
    const minutes = quote.seconds / 60;
    const parts = quote.lines
      .filter((line) => line.amount !== "0.00")
      .map((line) => `${line.description} $${line.amount}`);
    // Below a cent the rounded total says $0.00; the exact one says more.
    const total = quote.total_rounded === "0.00" ? quote.total : quote.total_rounded;
    return `At most $${total} for the time limit (${minutes} min) at ${quote.plan} plan prices` +
      (parts.length ? ` (${parts.join(" + ")})` : "") + ", before included hours and credits." +
      window.quoteCoverage(quote.coverage);
  }


  async function refresh() {
    const body = request();
    if (inFlight) inFlight.abort();
    if (!body) { show(""); return; }
    inFlight = new AbortController();
    const token = form.querySelector('[name="csrfmiddlewaretoken"]');
    try {
      const response = await fetch(out.dataset.quoteUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": token ? token.value : "" },
        body: JSON.stringify(body),
        signal: inFlight.signal,
      });
      const data = await response.json();
      show(response.ok ? describe(data) : `No price yet: ${data.detail || response.status}`);
    } catch (error) {
      if (error.name !== "AbortError") show("");
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  }

  watched.forEach((name) => {
    const input = field(name);
    if (input) {
      input.addEventListener("input", schedule);
      input.addEventListener("change", schedule);
    }
  });
  refresh();
})();
