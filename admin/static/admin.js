/* kbframework admin: a little JavaScript, no build step, no framework.
   Progressive: every page works without it except the test chat and the live previews. */
(function () {
  "use strict";

  var CSRF = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function el(tag, attrs, children) {
    var n = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") n.textContent = attrs[k];
      else if (k === "class") n.className = attrs[k];
      else if (attrs[k] !== null && attrs[k] !== undefined && attrs[k] !== false) n.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) n.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return n;
  }

  /* JSON API with the CSRF header; rejects with the server's message. */
  function api(method, url, body) {
    var opts = { method: method, credentials: "same-origin",
                 headers: { "Accept": "application/json", "X-CSRF-Token": CSRF } };
    if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
    return fetch(url, opts).then(function (r) {
      return r.text().then(function (t) {
        var data = null;
        try { data = t ? JSON.parse(t) : {}; } catch (e) { data = null; }
        if (!r.ok) {
          var msg = (data && data.error && data.error.message) || ("The server answered " + r.status + ".");
          var err = new Error(msg); err.status = r.status; throw err;
        }
        return data;
      });
    });
  }
  window.KB = { api: api };

  /* ---------------------------------------------------------------- everywhere */
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f.matches && f.matches("form[data-confirm]") && !window.confirm(f.getAttribute("data-confirm"))) {
      e.preventDefault();
    }
  }, true);

  $all("tr[data-href]").forEach(function (tr) {
    tr.addEventListener("click", function (e) {
      if (e.target.closest("a, button, input, label, select")) return;
      window.location.href = tr.getAttribute("data-href");
    });
  });

  $all("[data-autosubmit]").forEach(function (s) {
    s.addEventListener("change", function () { s.form.submit(); });
  });

  $all("[data-copy]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var src = $(btn.getAttribute("data-copy"));
      if (!src) return;
      var text = src.value !== undefined && src.tagName !== "CODE" ? src.value : src.textContent;
      var done = function () {
        var label = btn.querySelector("span");
        var old = label ? label.textContent : "";
        btn.classList.add("copied");
        if (label) label.textContent = "Copied";
        setTimeout(function () { btn.classList.remove("copied"); if (label) label.textContent = old; }, 1600);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { selectText(src); });
      } else {
        selectText(src);
        try { document.execCommand("copy"); done(); } catch (e) { /* selected: the user can copy */ }
      }
    });
  });
  function selectText(node) {
    var r = document.createRange(); r.selectNodeContents(node);
    var s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
  }

  /* ---------------------------------------------------------------- bulk select (documents) */
  $all("form[data-bulk]").forEach(function (form) {
    var all = $("[data-select-all]", form);
    var boxes = $all('input[name="ids"]', form);
    var count = $("[data-selected-count]", form);
    var buttons = $all("[data-bulk-action]", form);
    function update() {
      var n = boxes.filter(function (b) { return b.checked; }).length;
      if (count) count.textContent = n + " selected";
      buttons.forEach(function (b) { b.disabled = n === 0; });
      if (all) { all.checked = n > 0 && n === boxes.length; all.indeterminate = n > 0 && n < boxes.length; }
    }
    if (all) all.addEventListener("change", function () { boxes.forEach(function (b) { b.checked = all.checked; }); update(); });
    boxes.forEach(function (b) { b.addEventListener("change", update); });
    update();
  });

  /* ---------------------------------------------------------------- file uploads (PDF) */
  $all("form[data-upload]").forEach(function (form) {
    var err = $("[data-upload-error]", form), status = $("[data-upload-status]", form);
    var btn = $("[data-upload-submit]", form);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      err.hidden = true;
      if (btn) btn.disabled = true;
      status.textContent = "Uploading and extracting… large files take a moment.";
      fetch(form.getAttribute("data-upload"), { method: "POST", body: new FormData(form), credentials: "same-origin",
                                                headers: { "X-CSRF-Token": CSRF, "Accept": "application/json" } })
        .then(function (r) {
          return r.json().catch(function () { return {}; }).then(function (d) {
            if (!r.ok) throw new Error((d.error && d.error.message) || ("The upload failed (" + r.status + ")."));
            return d;
          });
        })
        .then(function (d) { window.location.href = form.getAttribute("data-doc-url").replace("DOC", d.id); },
              function (e2) { err.textContent = e2.message; err.hidden = false; status.textContent = ""; if (btn) btn.disabled = false; });
    });
  });

  /* ---------------------------------------------------------------- JSON editor (field mappings) */
  $all("[data-json-editor]").forEach(function (box) {
    var ta = $("textarea[data-json]", box);
    var status = $("[data-json-status]", box);
    function check() {
      var v = ta.value.trim();
      status.classList.remove("ok", "bad");
      if (!v) { status.textContent = "Empty: the connector's defaults apply."; return true; }
      try {
        var parsed = JSON.parse(v);
        var kind = ta.getAttribute("data-json-kind") || "object";
        if (kind === "array" && !Array.isArray(parsed)) {
          status.textContent = "It must be a JSON list: [ … ]."; status.classList.add("bad"); return false;
        }
        if (kind === "object" && (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))) {
          status.textContent = "It must be a JSON object: { … }."; status.classList.add("bad"); return false;
        }
        status.textContent = "✓ Valid JSON · " + (Array.isArray(parsed) ? parsed.length + " item(s)"
          : parsed !== null && typeof parsed === "object" ? Object.keys(parsed).length + " top-level key(s)" : "a value");
        status.classList.add("ok");
        return true;
      } catch (e) {
        var m = /position (\d+)/.exec(e.message);
        var where = "";
        if (m) {
          var pos = +m[1], before = v.slice(0, pos).split("\n");
          where = " (line " + before.length + ", column " + (before[before.length - 1].length + 1) + ")";
        }
        status.textContent = "Not valid JSON" + where + ": " + e.message.replace(/^JSON\.parse: /, "");
        status.classList.add("bad");
        return false;
      }
    }
    ta.addEventListener("input", check);
    var fmt = $("[data-json-format]", box);
    if (fmt) fmt.addEventListener("click", function () {
      if (check() && ta.value.trim()) ta.value = JSON.stringify(JSON.parse(ta.value), null, 2);
    });
    var ex = $("[data-json-example]", box);
    if (ex) ex.addEventListener("click", function () {
      if (ta.value.trim() && !window.confirm("Replace the current mapping with the example?")) return;
      ta.value = ta.getAttribute("data-example") || "{}";
      check();
    });
    check();
    var form = ta.form;
    if (form) form.addEventListener("submit", function (e) {
      if (!check()) { e.preventDefault(); ta.focus(); status.scrollIntoView({ block: "center" }); }
    });
  });

  /* ---------------------------------------------------------------- markdown editor */
  $all("[data-md-editor]").forEach(function (box) {
    var ta = $("[data-md-input]", box);
    var preview = $("[data-md-preview]", box);
    var status = $("[data-md-status]", box);
    var panes = $(".md-panes", box);
    var timer = null, seq = 0;

    function render() {
      var mine = ++seq;
      if (!ta.value.trim()) { preview.innerHTML = '<p class="muted">The preview appears here.</p>'; stats(); return; }
      api("POST", "/api/admin/v1/markdown/preview", { markdown: ta.value }).then(function (d) {
        if (mine === seq) { preview.innerHTML = d.html; stats(); }   // sanitized on the server (bleach)
      }, function (err) { if (mine === seq) status.textContent = "Preview unavailable: " + err.message; });
    }
    function stats() {
      var words = (ta.value.match(/\S+/g) || []).length;
      var heads = (ta.value.match(/^#{1,6}\s/mg) || []).length;
      status.textContent = words + " words · " + heads + " heading" + (heads === 1 ? "" : "s") +
        (heads ? " — each section becomes its own chunk when long enough" : "");
    }
    function schedule() { clearTimeout(timer); timer = setTimeout(render, 250); }
    ta.addEventListener("input", schedule);

    function wrap(before, after, placeholder) {
      var s = ta.selectionStart, e = ta.selectionEnd, sel = ta.value.slice(s, e) || placeholder;
      ta.setRangeText(before + sel + after, s, e, "end");
      ta.setSelectionRange(s + before.length, s + before.length + sel.length);
    }
    function linePrefix(prefix, numbered) {
      var s = ta.selectionStart, e = ta.selectionEnd, v = ta.value;
      var ls = v.lastIndexOf("\n", s - 1) + 1;
      var le = v.indexOf("\n", e); if (le < 0) le = v.length;
      var lines = v.slice(ls, le).split("\n").map(function (l, i) { return (numbered ? (i + 1) + ". " : prefix) + l; });
      ta.setRangeText(lines.join("\n"), ls, le, "select");
    }
    var actions = {
      bold: function () { wrap("**", "**", "bold text"); },
      italic: function () { wrap("_", "_", "italic text"); },
      h2: function () { linePrefix("## "); },
      ul: function () { linePrefix("- "); },
      ol: function () { linePrefix("", true); },
      quote: function () { linePrefix("> "); },
      code: function () { wrap("`", "`", "code"); },
      link: function () {
        var url = window.prompt("Link address (https://…)", "https://");
        if (url) wrap("[", "](" + url + ")", "link text");
      },
      table: function () {
        ta.setRangeText("\n| Question | Answer |\n| --- | --- |\n| … | … |\n", ta.selectionStart, ta.selectionEnd, "end");
      }
    };
    $all("[data-md]", box).forEach(function (b) {
      b.addEventListener("click", function () { ta.focus(); actions[b.getAttribute("data-md")](); schedule(); });
    });
    ta.addEventListener("keydown", function (e) {
      if ((e.ctrlKey || e.metaKey) && (e.key === "b" || e.key === "i")) {
        e.preventDefault(); actions[e.key === "b" ? "bold" : "italic"](); schedule();
      }
    });
    $all("[data-md-view]", box).forEach(function (b) {
      b.addEventListener("click", function () {
        panes.setAttribute("data-view", b.getAttribute("data-md-view"));
        $all("[data-md-view]", box).forEach(function (x) { x.classList.toggle("active", x === b); });
        if (b.getAttribute("data-md-view") !== "write") render();
      });
    });
    render();
  });

  /* ---------------------------------------------------------------- settings */
  var promptTa = $("[data-prompt]");
  if (promptTa) {
    var radios = $all('input[name="preset"]');
    var fallback = $("[data-fallback]");
    var checked = function () { return radios.filter(function (r) { return r.checked; })[0]; };
    radios.forEach(function (r) {
      r.addEventListener("change", function () {
        radios.forEach(function (x) { x.closest(".preset").classList.toggle("selected", x.checked); });
        var cur = checked();
        if (fallback && cur) fallback.placeholder = cur.getAttribute("data-preset-fallback") || "";
        var wasPreset = radios.some(function (x) { return x.getAttribute("data-preset-template").trim() === promptTa.value.trim(); });
        if (cur && (wasPreset || !promptTa.value.trim())) promptTa.value = cur.getAttribute("data-preset-template");
      });
    });
    var use = $("[data-use-preset]");
    if (use) use.addEventListener("click", function () {
      var cur = checked();
      if (cur) promptTa.value = cur.getAttribute("data-preset-template");
    });
  }
  var preview = $("[data-widget-preview]");
  if (preview) {
    var picker = $("[data-color-picker]"), text = $("[data-color-text]"), logo = $("[data-logo]");
    var title = $("[data-brand-title]"), welcome = $("[data-brand-welcome]");
    var paint = function () {
      var c = /^#[0-9a-fA-F]{6}$/.test(text.value.trim()) ? text.value.trim() : picker.value;
      preview.style.setProperty("--brand", c);
      $(".wp-title", preview).textContent = title.value.trim() || title.placeholder;
      $(".wp-msg", preview).textContent = welcome.value.trim() || welcome.placeholder;
      var img = $(".wp-logo", preview), ph = $(".wp-logo-ph", preview);
      if (/^https?:\/\//.test(logo.value.trim())) { img.src = logo.value.trim(); img.hidden = false; ph.style.display = "none"; }
      else { img.hidden = true; ph.style.display = ""; }
    };
    picker.addEventListener("input", function () { text.value = picker.value; paint(); });
    text.addEventListener("input", function () { if (/^#[0-9a-fA-F]{6}$/.test(text.value.trim())) picker.value = text.value.trim(); paint(); });
    [logo, title, welcome].forEach(function (i) { i.addEventListener("input", paint); });
    paint();
  }
  var checkBtn = $("[data-check-providers]");
  if (checkBtn) checkBtn.addEventListener("click", function () {
    checkBtn.disabled = true; checkBtn.textContent = "Checking…";
    api("POST", "/api/admin/v1/providers/check", {}).then(function (d) {
      ["embedding", "llm"].forEach(function (k) {
        var box = $('[data-provider-state="' + k + '"]'), r = d[k] || {};
        box.textContent = "";
        box.appendChild(el("span", { class: "pill " + (r.ok ? "pill-ok" : "pill-error"),
          text: r.ok ? "answered in " + r.ms + " ms" : "did not answer" }));
        var note = r.ok ? (k === "llm" && r.used_llm === false ? " offline answerer (no LLM configured)" : (r.reply ? " “" + r.reply + "”" : ""))
                        : " " + (r.error || "");
        box.appendChild(el("span", { class: "small " + (r.ok ? "muted" : "err-text"), text: note }));
      });
    }, function (err) { window.alert(err.message); }).then(function () {
      checkBtn.disabled = false; checkBtn.textContent = "Check they answer";
    });
  });

  /* ---------------------------------------------------------------- test chat */
  var chat = $("[data-chat]");
  if (chat) initChat(chat);

  function initChat(root) {
    var log = $("[data-chat-log]", root), form = $("[data-chat-form]", root), q = $("[data-chat-q]", root);
    var send = $("[data-chat-send]", root), empty = $("[data-chat-empty]", root);
    var debugBox = $("[data-debug]", root), debugLabel = $("[data-debug-label]", root);
    var modeSel = $("[data-chat-mode]"), reset = $("[data-chat-reset]");
    var canRate = root.getAttribute("data-can-rate") === "true";
    var docUrl = function (id) { return root.getAttribute("data-doc-url").replace("DOC", id); };
    var traceUrl = function (id) { return root.getAttribute("data-trace-url").replace("LOG", id); };
    var history = [], sessionId = "admin-" + Math.random().toString(36).slice(2), busy = false;

    function scroll() { log.scrollTop = log.scrollHeight; }

    function showTrace(messageId, msgNode) {
      $all(".msg-bot", log).forEach(function (m) { m.classList.toggle("selected", m === msgNode); });
      debugLabel.textContent = "loading…";
      fetch(traceUrl(messageId), { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error("The trace could not be loaded (" + r.status + ").");
        return r.text();
      }).then(function (html) {
        debugBox.innerHTML = html;     // rendered by our own server-side template (escaped by Jinja)
        debugLabel.textContent = "for “" + (msgNode.getAttribute("data-question") || "") + "”";
      }, function (err) { debugBox.textContent = err.message; debugLabel.textContent = ""; });
    }

    function fmtDate(iso) {
      var d = new Date(iso);
      return isNaN(d) ? iso : d.toLocaleString(undefined, { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
    }

    function renderCards(cards) {
      if (!cards || !cards.length) return null;
      return el("div", { class: "cards" }, cards.map(function (c) {
        var facts = [];
        if (c.price) facts.push(c.price);
        if (c.date) facts.push(fmtDate(c.date));
        if (c.venue) facts.push(c.venue);
        if (c.in_stock === false) facts.push("out of stock");
        return el("div", { class: "kcard" }, [
          c.image ? el("img", { src: c.image, alt: "", loading: "lazy" }) : null,
          el("div", { class: "kcard-body" }, [
            el("span", { class: "kcard-type", text: c.type }),
            c.url ? el("a", { class: "kcard-title", href: c.url, target: "_blank", rel: "noopener noreferrer", text: c.title })
                  : el("span", { class: "kcard-title", text: c.title }),
            facts.length ? el("span", { class: "muted", text: facts.join(" · ") }) : null,
            c.excerpt ? el("span", { class: "muted small", text: c.excerpt.slice(0, 140) }) : null,
            el("a", { href: docUrl(c.document_id), class: "small", text: "document →" })
          ])
        ]);
      }));
    }

    function renderSources(sources) {
      if (!sources || !sources.length) return null;
      return el("ol", { class: "sources-list" }, sources.map(function (s) {
        return el("li", {}, [
          el("strong", { text: "[" + s.n + "] " }),
          el("a", { href: docUrl(s.document_id), text: s.document_title }),
          el("span", { class: "muted", text: " · " + s.source_type + (s.pages ? " · " + s.pages : "") + " · " + s.document_role }),
          s.source_url ? el("a", { href: s.source_url, target: "_blank", rel: "noopener noreferrer", class: "small", text: " ↗" }) : null,
          el("span", { class: "snippet-text", text: s.snippet })
        ]);
      }));
    }

    function addUser(text) {
      if (empty) empty.remove();
      log.appendChild(el("div", { class: "msg msg-user" }, [el("div", { class: "bubble bubble-user", text: text })]));
      scroll();
    }

    function addBot(res, question) {
      var dbg = res.debug || {}, llm = dbg.llm || {}, t = (dbg.timings_ms || {}).total;
      var meta = el("div", { class: "msg-meta" }, [
        el("span", { class: "pill " + (dbg.reason ? "pill-warn" : "pill-ok"), text: dbg.reason ? "no answer: " + dbg.reason.replace(/_/g, " ") : "answered" }),
        el("span", { text: res.mode + (llm.model ? " · " + llm.model : "") + (t ? " · " + Math.round(t) + " ms" : "") })
      ]);
      var node = el("div", { class: "msg msg-bot", "data-message-id": res.message_id, "data-question": question }, [
        el("div", { class: "bubble bubble-bot", title: "Show this answer's steps in the debug panel" }, [el("pre", { class: "answer-text", text: res.answer })]),
        renderCards(res.cards),
        renderSources(res.sources),
        res.alternatives ? el("div", {}, [el("div", { class: "alt-label", text: res.alternatives.label }),
                                          renderCards(res.alternatives.cards), renderSources(res.alternatives.sources)]) : null,
        meta
      ]);
      var steps = el("button", { type: "button", class: "btn btn-sm btn-ghost", text: "Steps" });
      steps.addEventListener("click", function () { showTrace(res.message_id, node); });
      meta.appendChild(steps);
      if (canRate) {
        ["up", "down"].forEach(function (rating) {
          var b = el("button", { type: "button", class: "btn btn-sm rate", title: rating === "up" ? "Good answer" : "Bad answer",
                                 "data-rate": rating, text: rating === "up" ? "👍" : "👎" });
          b.addEventListener("click", function () {
            var comment = rating === "down" ? window.prompt("What was wrong? (optional)", "") : null;
            if (comment === null && rating === "down") comment = "";
            api("POST", "/api/admin/v1/chat-logs/" + res.message_id + "/feedback", { rating: rating, comment: comment || null })
              .then(function () {
                $all("[data-rate]", meta).forEach(function (x) { x.disabled = true; });
                b.classList.add("active-" + rating);
              }, function (err) { window.alert(err.message); });
          });
          meta.appendChild(b);
        });
      }
      node.querySelector(".bubble-bot").addEventListener("click", function () { showTrace(res.message_id, node); });
      log.appendChild(node);
      scroll();
      showTrace(res.message_id, node);
    }

    function ask(text) {
      if (busy || !text.trim()) return;
      busy = true; send.disabled = true;
      addUser(text);
      var typing = el("div", { class: "msg msg-bot" }, [el("div", { class: "bubble bubble-bot typing", "aria-label": "Thinking" },
        [el("span"), el("span"), el("span")])]);
      log.appendChild(typing); scroll();
      api("POST", "/api/admin/v1/chat", { question: text, history: history.slice(-12), mode: modeSel && modeSel.value || null,
                                          session_id: sessionId })
        .then(function (res) {
          typing.remove();
          addBot(res, text);
          history.push({ role: "user", content: text }, { role: "assistant", content: res.answer });
        }, function (err) {
          typing.remove();
          log.appendChild(el("div", { class: "msg msg-bot" }, [el("div", { class: "flash flash-error", role: "alert", text: err.message })]));
          scroll();
        })
        .then(function () { busy = false; send.disabled = false; q.focus(); });
    }

    form.addEventListener("submit", function (e) { e.preventDefault(); var t = q.value; q.value = ""; ask(t); });
    q.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });
    if (reset) reset.addEventListener("click", function () {
      history = []; sessionId = "admin-" + Math.random().toString(36).slice(2);
      $all(".msg", log).forEach(function (m) { m.remove(); });
      debugBox.innerHTML = '<p class="muted">A new conversation: ask a question.</p>'; debugLabel.textContent = "no answer yet";
    });
    if (q.value.trim()) { var first = q.value; q.value = ""; ask(first); }
  }
})();
