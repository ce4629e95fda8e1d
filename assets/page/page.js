// The public genie page's chat (local voice provider): text, streamed replies with the
// genie's tool steps, ending, and a talk mode with the browser's own speech recognition and
// synthesis. No build step, no framework.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || main.dataset.mode !== "chat") return;
  var slug = main.dataset.slug;
  var lang = main.dataset.lang || document.documentElement.lang || "en";
  var speed = parseFloat(main.dataset.speed) || 1;
  var start = document.getElementById("start");
  var panel = document.getElementById("chat-panel");
  var form = document.getElementById("chat-form");
  var input = document.getElementById("message");
  var send = document.getElementById("send");
  var log = document.getElementById("log");
  var status = document.getElementById("status");
  var talk = document.getElementById("talk");
  var talkNote = document.getElementById("talk-note");
  var endButton = document.getElementById("end");
  var base = "/g/" + encodeURIComponent(slug) + "/chat";
  var conversationId = null;
  var talking = false;
  var Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;

  function add(role, text) {
    var li = document.createElement("li");
    li.className = role;
    var who = document.createElement("span");
    who.className = "visually-hidden";
    who.textContent = role === "user" ? "You: " : role === "agent" ? main.querySelector("h1").textContent + ": " : role === "step" ? "" : "Notice: ";
    li.appendChild(who);
    var body = document.createTextNode(text);
    li.appendChild(body);
    log.appendChild(li);
    log.scrollTop = log.scrollHeight;
    return body;
  }

  start.addEventListener("click", function () {
    start.hidden = true;
    panel.hidden = false;
    input.focus();
  });

  // One SSE block ("event: x\ndata: {...}") at a time, as the server sends them.
  function readEvents(response, onEvent) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) return;
        buffer += decoder.decode(r.value, { stream: true });
        var end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          var block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          var name = "message", data = "";
          block.split("\n").forEach(function (line) {
            if (line.indexOf("event: ") === 0) name = line.slice(7);
            else if (line.indexOf("data: ") === 0) data += line.slice(6);
          });
          if (data) onEvent(name, JSON.parse(data));
        }
        return pump();
      });
    }
    return pump();
  }

  function ended(message) {
    conversationId = null;
    add("notice", message);
    stopTalking();
  }

  function speak(text) {
    if (!talking || !window.speechSynthesis) return;
    var u = new SpeechSynthesisUtterance(text);
    u.lang = lang;
    u.rate = speed;
    u.onend = function () { if (talking) listen(); };
    window.speechSynthesis.speak(u);
  }

  function sendMessage(text) {
    add("user", text);
    send.disabled = true;
    status.textContent = "Waiting for a reply…";
    var reply = null, steps = {};
    return fetch(base, {
      method: "POST",
      headers: { "content-type": "application/json", "accept": "text/event-stream" },
      body: JSON.stringify({ conversation_id: conversationId, message: text })
    })
      .then(function (r) {
        var type = r.headers.get("content-type") || "";
        if (type.indexOf("text/event-stream") < 0) {
          return r.json().then(function (b) {
            throw new Error((b.error && b.error.message) || "request failed");
          });
        }
        var failure = null, answer = null;
        return readEvents(r, function (name, d) {
          if (name === "token") {
            if (!reply) reply = add("agent", "");
            reply.textContent += d.text;
            status.textContent = "";
          } else if (name === "tool") {
            if (d.status === "running") steps[d.name] = add("step", "Looking up… (" + d.name.replace(/_/g, " ") + ")");
            else if (steps[d.name]) steps[d.name].textContent = (d.status === "done" ? "Looked up " : "Could not look up ") + d.name.replace(/_/g, " ");
          } else if (name === "done") {
            answer = d;
          } else if (name === "error") {
            failure = d;
          }
        }).then(function () {
          if (failure) throw new Error(failure.message);
          if (!answer) throw new Error("the reply was cut off");
          conversationId = answer.conversation_id;
          if (!reply) add(answer.configured ? "agent" : "notice", answer.reply);
          status.textContent = "";
          if (answer.configured) speak(answer.reply);
          if (answer.ended) ended("The conversation has ended.");
        });
      })
      .catch(function (e) { status.textContent = "Could not send the message: " + e.message; })
      .then(function () { send.disabled = false; });
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var text = input.value.trim();
    if (!text) return;
    input.value = "";
    sendMessage(text).then(function () { input.focus(); });
  });

  endButton.addEventListener("click", function () {
    if (!conversationId) return;
    var id = conversationId;
    fetch(base + "/end", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ conversation_id: id })
    }).then(function (r) {
      if (r.ok) ended("You ended the conversation.");
      else status.textContent = "Could not end the conversation.";
    });
  });

  // Talk mode: the browser's speech recognition turns speech into the next message, and
  // the reply is spoken in the genie's language and speed. Text stays the fallback.
  var recognition = null;
  function listen() {
    if (!recognition) return;
    try { recognition.start(); status.textContent = "Listening…"; } catch (e) { /* already listening */ }
  }
  function stopTalking() {
    talking = false;
    talk.setAttribute("aria-pressed", "false");
    talk.textContent = "Talk";
    if (recognition) { try { recognition.abort(); } catch (e) { /* not listening */ } }
    if (window.speechSynthesis) window.speechSynthesis.cancel();
  }
  if (!Recognition) {
    talk.disabled = true;
    talkNote.hidden = false;
    talkNote.textContent = "This browser offers no speech recognition, so talking is not available here: type your message instead.";
  } else {
    recognition = new Recognition();
    recognition.lang = lang;
    recognition.interimResults = false;
    recognition.continuous = false;
    recognition.onresult = function (ev) {
      var text = ev.results[0][0].transcript.trim();
      if (text) sendMessage(text);
    };
    recognition.onerror = function (ev) { status.textContent = "Speech recognition: " + ev.error; };
    talk.addEventListener("click", function () {
      if (talking) { stopTalking(); status.textContent = ""; return; }
      talking = true;
      talk.setAttribute("aria-pressed", "true");
      talk.textContent = "Stop talking";
      listen();
    });
  }
})();
