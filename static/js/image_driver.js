// The job form's driver check: beside the chosen image, its CUDA and the NVIDIA driver it needs,
// and the driver the nodes of the chosen GPU type last reported (jobs/drivers.py); a warning
// when those nodes run an older driver than the image needs (compared by major.minor, as
// foundation/images.py does). Nothing is refused: the person decides.
(function () {
  "use strict";
  const source = document.getElementById("image-driver-data");
  const note = document.querySelector("[data-image-driver]");
  const imageInput = document.getElementById("id_image");
  const typeSelect = document.getElementById("id_gpu_type");
  if (!source || !note || !imageInput || !typeSelect) return;
  const data = JSON.parse(source.textContent || "{}");
  function parts(version) { return (version || "").split("-")[0].split(".").slice(0, 2).map(Number); }
  function older(driver, needed) {
    const a = parts(driver), b = parts(needed);
    for (let i = 0; i < 2; i++) { if ((a[i] || 0) !== (b[i] || 0)) return (a[i] || 0) < (b[i] || 0); }
    return false;
  }
  function update() {
    const image = (data.images || {})[imageInput.value.trim()];
    const type = typeSelect.value;
    const nodes = (data.drivers || {})[type] || {};
    note.classList.remove("field-error");
    note.dataset.mismatch = "0";
    if (!image) { note.textContent = ""; return; }
    let text = "CUDA " + image.cuda + (image.min_driver ? ", needs NVIDIA driver ≥ " + image.min_driver : "") + ". ";
    if (nodes.oldest) {
      text += type + " nodes run driver " + nodes.oldest +
        (nodes.source === "emulator" ? " (stated by the dev cluster's GPU emulator)" : "") + ".";
      if (image.min_driver && older(nodes.oldest, image.min_driver)) {
        text += " Warning: that driver is older than this image needs; the job may fail at its first CUDA call." +
          " Choose an image built for an older CUDA, or another GPU type.";
        note.classList.add("field-error");
        note.dataset.mismatch = "1";
      }
    } else {
      text += "The " + type + " nodes have not reported their driver yet.";
    }
    note.textContent = text;
  }
  imageInput.addEventListener("input", update);
  imageInput.addEventListener("change", update);
  typeSelect.addEventListener("change", update);
  update();
})();
