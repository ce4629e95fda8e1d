// The public genie page's text chat (local voice provider). No build step, no framework.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || main.dataset.mode !== "chat") return;
  var slug = main.dataset.slug;
  var start = document.getElementById("start");
  var panel = document.getElementById("chat-panel");
  var form = document.getElementById("chat-form");
  var input = document.getElementById("message");
  var send = document.getElementById("send");
  var log = document.getElementById("log");
  var status = document.getElementById("status");
  var conversationId = null;

  function add(role, text) {
    var li = document.createElement("li");
    li.className = role;
    var who = document.createElement("span");
    who.className = "visually-hidden";
    who.textContent = role === "user" ? "You: " : role === "agent" ? main.querySelector("h1").textContent + ": " : "Notice: ";
    li.appendChild(who);
    li.appendChild(document.createTextNode(text));
    log.appendChild(li);
    log.scrollTop = log.scrollHeight;
  }

  start.addEventListener("click", function () {
    start.hidden = true;
    panel.hidden = false;
    input.focus();
  });

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var text = input.value.trim();
    if (!text) return;
    add("user", text);
    input.value = "";
    send.disabled = true;
    status.textContent = "Waiting for a reply…";
    fetch("/g/" + encodeURIComponent(slug) + "/chat", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ conversation_id: conversationId, message: text })
    })
      .then(function (r) { return r.json().then(function (b) { return { ok: r.ok, body: b }; }); })
      .then(function (res) {
        if (!res.ok) throw new Error((res.body.error && res.body.error.message) || "request failed");
        conversationId = res.body.data.conversation_id;
        add(res.body.data.configured ? "agent" : "notice", res.body.data.reply);
        status.textContent = "";
      })
      .catch(function (e) { status.textContent = "Could not send the message: " + e.message; })
      .then(function () { send.disabled = false; input.focus(); });
  });
})();
