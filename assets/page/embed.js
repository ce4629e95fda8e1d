// genied's chat widget: one <script src=".../g/{slug}/embed.js"> puts a chat bubble on a
// site; the bubble opens the genie's page (text and talk) in a frame. The genie's owner
// lists the sites allowed to do this in its allowed_origins.
(function () {
  "use strict";
  var BASE = __BASE__, SLUG = __SLUG__, NAME = __NAME__, ALLOWED = __ALLOWED__, REFUSED = __REFUSED__;
  var here = window.location.origin;
  if (REFUSED || (here !== BASE && ALLOWED.indexOf(here) < 0)) {
    console.error("genied: " + here + " may not embed the genie '" + SLUG + "'; its owner can add " + here + " to the genie's allowed_origins.");
    return;
  }
  function mount() {
    var bubble = document.createElement("button");
    bubble.type = "button";
    bubble.id = "genied-bubble";
    bubble.setAttribute("aria-label", "Chat with " + NAME);
    bubble.setAttribute("aria-expanded", "false");
    bubble.textContent = "\u{1F4AC}";
    bubble.style.cssText = "position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;background:#1d4ed8;color:#fff;font-size:24px;cursor:pointer;z-index:2147483646;box-shadow:0 2px 8px rgba(0,0,0,.3)";
    var frame = null;
    bubble.addEventListener("click", function () {
      if (!frame) {
        frame = document.createElement("iframe");
        frame.id = "genied-frame";
        frame.title = "Chat with " + NAME;
        frame.src = BASE + "/g/" + encodeURIComponent(SLUG) + "?embed=1";
        frame.allow = "microphone";
        frame.style.cssText = "position:fixed;right:20px;bottom:88px;width:360px;height:520px;max-width:calc(100vw - 40px);border:1px solid #cbd5e1;border-radius:12px;background:#fff;z-index:2147483647";
        document.body.appendChild(frame);
      } else {
        frame.hidden = !frame.hidden;
      }
      bubble.setAttribute("aria-expanded", String(!frame.hidden));
    });
    document.body.appendChild(bubble);
  }
  if (document.body) mount(); else document.addEventListener("DOMContentLoaded", mount);
})();
