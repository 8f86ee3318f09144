/* Conversations in the admin: post a question with fetch, then poll the thread every few seconds until no answer
   is pending, without a reload. The server renders (and escapes) the thread; this only puts it in place. */
(function () {
  "use strict";
  var POLL_MS = 2000;

  function csrf(form) {
    var field = form.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function setUp(box) {
    var thread = box.querySelector(".conversation-thread");
    var form = box.querySelector(".conversation-form");
    var status = box.querySelector(".conversation-status");
    var open = box.querySelector(".conversation-open");
    var messagesUrl = box.dataset.messagesUrl;
    var started = null;
    var timer = null;

    function show(answer) {
      thread.innerHTML = answer.html;
      messagesUrl = answer.messages;
      form.action = answer.post;
      if (open) {
        open.hidden = false;
        open.querySelector("a").href = answer.page;
      }
      if (answer.answering) {
        started = started || Date.now();
        status.textContent = "The team is answering… " + Math.round((Date.now() - started) / 1000) + " s";
        timer = setTimeout(poll, POLL_MS);
      } else {
        started = null;
        status.textContent = "";
      }
    }

    function poll() {
      timer = null;
      fetch(messagesUrl, {headers: {Accept: "application/json"}, credentials: "same-origin"})
        .then(function (response) { return response.json(); })
        .then(show)
        .catch(function () {
          status.textContent = "Could not reach the server; trying again…";
          timer = setTimeout(poll, POLL_MS * 3);
        });
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = form.querySelector("button[type=submit]");
      button.disabled = true;
      status.textContent = "Sending…";
      fetch(form.action, {method: "POST", body: new FormData(form), credentials: "same-origin",
                          headers: {Accept: "application/json", "X-CSRFToken": csrf(form)}})
        .then(function (response) {
          return response.json().then(function (body) { return {ok: response.ok, body: body}; });
        })
        .then(function (answer) {
          button.disabled = false;
          if (!answer.ok) {
            status.textContent = answer.body.error || "Not sent.";
            return;
          }
          form.querySelector("textarea").value = "";
          if (timer) { clearTimeout(timer); }
          started = Date.now();
          show(answer.body);
        })
        .catch(function () {
          button.disabled = false;
          status.textContent = "Not sent: the server could not be reached.";
        });
    });

    if (messagesUrl && (box.dataset.answering === "true" || !box.dataset.answering)) {
      poll();
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-conversation]").forEach(setUp);
  });
})();
