// The datasets page's upload: each chosen file is a tus upload (tus-js-client, vendored) into
// the dataset's open version, in chunks of at most 8 MiB (nginx's body limit), resumed where
// the server stands after a dropped connection or a reload (the server lists the open
// version's uploads; tus-js-client also keeps each upload's URL in localStorage). When every
// file is in, the version is committed and the page waits for the worker's sha256 check.
(function () {
  "use strict";
  const panel = document.querySelector("[data-upload]");
  if (!panel || !window.tus) return;
  const api = panel.dataset.api; // "/api/v1/datasets/<id>/"
  const csrf = panel.querySelector("input[name=csrfmiddlewaretoken]").value;
  const statusLine = panel.querySelector("[data-status]");
  const bar = panel.querySelector("[data-progress]");
  const CHUNK = 8 * 1024 * 1024;
  const FILES_AT_ONCE = 2;
  // A large file goes as parts sent at once (tus concatenation, as the CLI does from the same
  // size): each part on its own connection, joined by the server when the last is in. Resumed
  // after a reload from the part URLs tus-js-client keeps in localStorage.
  const PARTS_FROM = 64 * 1024 * 1024;
  const PARTS = 2;
  // WebCrypto digests whole buffers only: larger files go without a declared sha256 (the
  // server still computes and records theirs; the CLI declares every file's).
  const HASH_LIMIT = 512 * 1024 * 1024;

  function say(text) { statusLine.textContent = text; }

  async function call(method, url) {
    const response = await fetch(url, { method, headers: { "X-CSRFToken": csrf }, credentials: "same-origin" });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.detail || `HTTP ${response.status}`);
    return body;
  }

  async function sha256Hex(file) {
    if (file.size > HASH_LIMIT || !window.crypto || !crypto.subtle) return "";
    const digest = await crypto.subtle.digest("SHA-256", await file.arrayBuffer());
    return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function chosenFiles() {
    const files = [];
    for (const input of panel.querySelectorAll("[data-files], [data-folder]")) {
      for (const file of input.files) files.push({ file, path: file.webkitRelativePath || file.name });
    }
    return files;
  }

  function seconds(value) {
    if (!isFinite(value)) return "…";
    const s = Math.round(value);
    return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`
      : s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
  }

  function megabytes(bytes) { return (bytes / 1e6).toFixed(1) + " MB"; }

  // Rate over the last few seconds, so a pause (offline, a retry) shows as a falling rate.
  function meter(total) {
    const samples = [];
    return function (done) {
      const now = performance.now();
      samples.push([now, done]);
      while (samples.length > 2 && now - samples[0][0] > 5000) samples.shift();
      const [t0, d0] = samples[0];
      const rate = now > t0 ? ((done - d0) * 1000) / (now - t0) : 0;
      bar.value = total ? (done * 100) / total : 100;
      say(`${megabytes(done)} of ${megabytes(total)} · ${megabytes(rate)}/s · ${seconds((total - done) / rate)} left`);
    };
  }

  function uploadOne(entry, endpoint, known, report) {
    return new Promise((resolve, reject) => {
      const options = {
        endpoint,
        chunkSize: CHUNK,
        retryDelays: [0, 1000, 2000, 4000, 8000, 15000, 30000],
        metadata: { path: entry.path },
        headers: { "X-CSRFToken": csrf },
        removeFingerprintOnSuccess: true,
        onProgress: (sent) => report(entry, sent),
        onError: reject,
        onSuccess: resolve,
      };
      if (entry.sha256) options.metadata.sha256 = entry.sha256;
      // The server's word first: an upload of this path in the open version is resumed at its URL.
      if (known && known.length === entry.file.size) {
        options.uploadUrl = new URL(known.url, location.href).href;
      } else if (entry.file.size >= PARTS_FROM) {
        options.parallelUploads = PARTS;
        // A part is no file of the version: no path of its own (docs/datasets.md, "Parts sent at once").
        options.metadataForPartialUploads = {};
      }
      const upload = new tus.Upload(entry.file, options);
      if (options.uploadUrl) { upload.start(); return; }
      upload.findPreviousUploads().then((previous) => {
        if (previous.length) upload.resumeFromPreviousUpload(previous[0]);
        upload.start();
      });
    });
  }

  // The versions table and quota above are re-read in place (static/js/live_parts.js).
  function reread() { document.dispatchEvent(new CustomEvent("live:refresh")); }

  async function waitUntilVerified(versionUrl) {
    for (;;) {
      const version = await call("GET", versionUrl);
      if (version.state === "ready" || version.state === "failed") return version;
      say(`Version ${version.number} is ${version.state}: the server checks every file's sha256…`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  async function start() {
    const files = chosenFiles();
    if (!files.length) { say("Choose files or a folder first."); return; }
    const startButton = panel.querySelector("[data-start]");
    startButton.disabled = true;
    try {
      let number = panel.dataset.openVersion;
      if (!number) {
        number = String((await call("POST", `${api}versions/`)).number);
        panel.dataset.openVersion = number;
        reread();
      }
      const versionUrl = `${api}versions/${number}/`;
      const known = new Map((await call("GET", versionUrl)).uploads.map((u) => [u.path, u]));
      say("Reading checksums…");
      for (const entry of files) entry.sha256 = await sha256Hex(entry.file);
      const total = files.reduce((sum, entry) => sum + entry.file.size, 0);
      const sent = new Map();
      const show = meter(total);
      const report = (entry, bytes) => {
        sent.set(entry.path, bytes);
        show([...sent.values()].reduce((a, b) => a + b, 0));
      };
      bar.hidden = false;
      // Two files at a time, each on its own connection: the server writes each file's upload
      // under its own lock, and two streams use both ends better than one (docs/datasets.md).
      const waiting = [...files];
      const sendNext = async () => {
        for (let entry = waiting.shift(); entry; entry = waiting.shift()) {
          try {
            await uploadOne(entry, `${versionUrl}uploads/`, known.get(entry.path), report);
          } catch (error) {
            waiting.length = 0; // the other stream finishes its file and starts no other
            throw error;
          }
          report(entry, entry.file.size);
        }
      };
      await Promise.all(Array.from({ length: FILES_AT_ONCE }, sendNext));
      say("Committing…");
      await call("POST", `${versionUrl}commit`);
      reread();
      const version = await waitUntilVerified(versionUrl);
      say(version.state === "ready" ? `Version ${version.number} is ready: sha256 ${version.sha256}` : `Version ${version.number} failed: ${version.error}`);
      // The version is closed: the next upload opens a new one, and the table shows this one.
      panel.dataset.openVersion = "";
      panel.querySelectorAll("[data-resume-note], [data-abandon]").forEach((element) => element.remove());
      bar.hidden = true;
      startButton.disabled = false;
      reread();
    } catch (error) {
      say(`Stopped: ${error.message || error}. Choose the same files and press Upload again to resume.`);
      startButton.disabled = false;
    }
  }

  panel.querySelector("[data-start]").addEventListener("click", start);
  const abandon = panel.querySelector("[data-abandon]");
  if (abandon) {
    abandon.addEventListener("click", async () => {
      if (!confirm("Abandon this version? Its uploaded bytes are removed.")) return;
      await call("POST", `${api}versions/${panel.dataset.openVersion}/abandon`).catch((e) => say(e.message));
      location.reload();
    });
  }
})();
