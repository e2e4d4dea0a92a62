/*! kbframework chat widget - plain ES2018, no dependencies, no innerHTML. */
(function () {
  'use strict';
  var W = window, D = document;
  if (W.KBFWidget) return; // loaded twice: keep the first instance

  // ---------------------------------------------------------------- settings
  var S = D.currentScript || (function () {
    var s = D.querySelectorAll('script[src*="widget"]');
    return s[s.length - 1];
  })();
  var P = W.__KBF__ || {};
  var ds = (S && S.dataset) || {};
  var src = null;
  try { src = new URL(S.src, location.href); } catch (e) { /* no script tag */ }

  var base = String(ds.base || P.base || (src ? src.origin : location.origin)).replace(/\/+$/, '');
  var key = ds.key || P.key || (src && src.searchParams.get('key')) || '';
  var api = ds.apiVersion || P.api || 'v1';
  var PAGE = ds.mode === 'page';
  var EP = base + '/api/embed/' + encodeURIComponent(api) + '/' + encodeURIComponent(key) + '/';

  var T = {
    open: 'Open chat', close: 'Close chat', send: 'Send message', msg: 'Message',
    typing: 'Assistant is typing', you: 'You said', bot: 'Assistant',
    sources: 'Sources', page: 'p.', up: 'Helpful', down: 'Not helpful',
    cmLabel: 'What went wrong? (optional)', cmPh: 'What went wrong? (optional)',
    cmSend: 'Send feedback', skip: 'Skip', thanks: 'Thanks for your feedback!',
    fbErr: 'Could not send feedback.', inStock: 'In stock', outStock: 'Out of stock',
    rate: 'Too many messages, try again in {n} s.', rate0: 'Too many messages, please wait a moment and try again.',
    net: 'Could not reach the assistant. Check your connection and try again.',
    err: 'Something went wrong. Please try again.', cut: 'The answer was interrupted.',
    retry: 'Retry', view: 'View', more: 'Read more'
  };
  var DEF = {
    title: 'Chat', color: '#2563eb', logo: null, welcome: 'Hi! How can I help you today?',
    placeholder: 'Type your question\u2026', show_sources: true, position: 'bottom-right'
  };
  var ATTR = {
    title: ds.title, color: ds.color, logo: ds.logo, welcome: ds.welcome, placeholder: ds.placeholder,
    show_sources: ds.showSources == null ? null : ds.showSources !== 'false', position: ds.position
  };
  function merge() {
    var o = {};
    for (var i = 0; i < arguments.length; i++) {
      var a = arguments[i] || {};
      for (var k in DEF) if (a[k] != null) o[k] = a[k];
    }
    return o;
  }
  var cfg = merge(DEF, ATTR);

  // ---------------------------------------------------------------- helpers
  function h(tag, attrs, text) {
    var e = D.createElement(tag);
    if (attrs) for (var k in attrs) if (attrs[k] != null && attrs[k] !== false) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = String(text);
    return e;
  }
  function txt(s) { return D.createTextNode(s); }
  // Only absolute http(s) URLs (relative ones resolve against the server).
  function safe(u) {
    if (!u || typeof u !== 'string') return null;
    try { var x = new URL(u, base + '/'); return /^https?:$/.test(x.protocol) ? x.href : null; } catch (e) { return null; }
  }
  function link(u, label, cls, kbf) {
    var href = safe(u);
    if (!href) return h('span', { class: cls }, label);
    return h('a', { href: href, target: '_blank', rel: 'noopener', class: cls, 'data-kbf': kbf }, label || href);
  }
  var SVG = 'http://www.w3.org/2000/svg';
  function icon(d) {
    var s = D.createElementNS(SVG, 'svg'), p = D.createElementNS(SVG, 'path');
    s.setAttribute('viewBox', '0 0 24 24'); s.setAttribute('aria-hidden', 'true'); s.setAttribute('focusable', 'false');
    p.setAttribute('d', d); s.appendChild(p);
    return s;
  }
  var I_CHAT = 'M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z';
  var I_X = 'M6 6l12 12M18 6L6 18';
  var I_DOWN = 'M6 9l6 6 6-6';
  var I_SEND = 'M4 12l16-8-6 16-2.5-6.5z';

  // Markdown-ish text -> DOM: **bold**, *italic*, [label](url), bare http(s) links, "- " bullets, "# " headings.
  // Line breaks are kept by CSS (white-space: pre-wrap). Everything else stays plain text.
  var RX = /\*\*([^*\n]+?)\*\*|\*([^\s*][^*\n]*?)\*(?![*\w])|\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)|(https?:\/\/[^\s<>"'()\[\]]*[^\s<>"'()\[\].,;:!?])/g;
  function rich(el, s) {
    el.textContent = '';
    s = String(s || '').replace(/^[ \t]*[-*\u2022] +/gm, '\u2022 ').replace(/^#{1,6} +(.+)$/gm, '**$1**').replace(/\n{3,}/g, '\n\n');
    var last = 0, m;
    RX.lastIndex = 0;
    while ((m = RX.exec(s))) {
      if (m.index > last) el.appendChild(txt(s.slice(last, m.index)));
      el.appendChild(m[1] ? h('strong', 0, m[1]) : m[2] ? h('em', 0, m[2]) : link(m[4] || m[5], m[3] || m[5]));
      last = RX.lastIndex;
    }
    el.appendChild(txt(s.slice(last)));
  }

  function rgbOf(c) {
    var m = /^#?([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(String(c || '').trim());
    if (!m) return null;
    var x = m[1].length === 3 ? m[1].replace(/./g, '$&$&') : m[1];
    return [0, 2, 4].map(function (i) { return parseInt(x.substr(i, 2), 16); });
  }
  function lum(c) {
    var a = c.map(function (v) { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * a[0] + 0.7152 * a[1] + 0.0722 * a[2];
  }
  function ratio(a, b) { return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); }

  function store(k, v) {
    try {
      if (v === undefined) return W.sessionStorage.getItem(k);
      W.sessionStorage.setItem(k, v);
    } catch (e) { /* storage blocked (privacy mode, sandboxed iframe) */ }
    return null;
  }
  function retryAfter(v) {
    if (!v) return 0;
    var n = parseInt(v, 10);
    if (String(n) === String(v).trim()) return n;
    var t = Date.parse(v);
    return isNaN(t) ? 0 : Math.max(1, Math.ceil((t - Date.now()) / 1000));
  }
  function fdate(s) {
    var m = /^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d))?/.exec(s || '');
    if (!m) return s || '';
    // Show the event's own wall-clock time, whatever the visitor's time zone.
    var d = new Date(Date.UTC(+m[1], m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0)));
    var o = { timeZone: 'UTC', weekday: 'short', day: 'numeric', month: 'short' };
    if (+m[1] !== new Date().getFullYear()) o.year = 'numeric';
    if (m[4]) { o.hour = '2-digit'; o.minute = '2-digit'; }
    try { return d.toLocaleString(D.documentElement.lang || undefined, o); } catch (e) { return d.toLocaleString(undefined, o); }
  }

  // ---------------------------------------------------------------- styles
  var CSS = [
    ':host{all:initial}',
    '[hidden]{display:none!important}',
    '.r{all:initial;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1f2328;-webkit-font-smoothing:antialiased;-webkit-text-size-adjust:100%}',
    '.r *,.r *::before,.r *::after{box-sizing:border-box;margin:0;padding:0}',
    'button,textarea{font:inherit;color:inherit;background:none;border:0}',
    'button{cursor:pointer}',
    'button:disabled{cursor:default;opacity:.5}',
    'a{color:var(--cd)}',
    ':focus-visible{outline:2px solid var(--cd);outline-offset:2px}',
    'svg{width:24px;height:24px;fill:none;stroke:currentColor;stroke-width:2;stroke-linecap:round;stroke-linejoin:round;display:block}',
    // bubble
    '.b{position:fixed;right:20px;bottom:20px;z-index:2147483000;width:60px;height:60px;border-radius:50%;background:var(--c);color:var(--ct);box-shadow:0 6px 20px rgba(0,0,0,.25);display:flex;align-items:center;justify-content:center;transition:transform .15s,opacity .2s}',
    '.b svg{width:28px;height:28px}',
    '.b:hover{transform:scale(1.06)}',
    '.b:focus-visible{outline:3px solid var(--cd);outline-offset:3px}',
    '.r:not(.rdy) .b{opacity:0;pointer-events:none}',
    '.l .b{right:auto;left:20px}',
    // panel
    '.p{position:fixed;right:20px;bottom:92px;z-index:2147483001;width:380px;height:640px;max-height:calc(100vh - 112px);display:flex;flex-direction:column;background:#fff;border-radius:16px;overflow:hidden;box-shadow:0 16px 48px rgba(0,0,0,.22),0 2px 8px rgba(0,0,0,.08);animation:kbf-in .18s ease-out}',
    '.l .p{right:auto;left:20px}',
    '@keyframes kbf-in{from{opacity:0;transform:translateY(12px) scale(.98)}}',
    '.pg .p{inset:0;width:auto;height:auto;max-height:none;border-radius:0;box-shadow:none;animation:none}',
    '.hd{display:flex;align-items:center;gap:10px;padding:14px 12px 14px 16px;background:var(--c);color:var(--ct);flex:none}',
    '.lg{width:32px;height:32px;border-radius:8px;object-fit:cover;background:#fff;flex:none}',
    '.tt{flex:1;min-width:0;font-size:16px;font-weight:600;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}',
    '.x{width:36px;height:36px;border-radius:50%;display:flex;align-items:center;justify-content:center;flex:none}',
    '.x:hover{background:rgba(127,127,127,.25)}',
    '.x:focus-visible{outline-color:currentColor}',
    '.log{flex:1;overflow-y:auto;overscroll-behavior:contain;padding:16px;background:#f6f7f9;display:flex;flex-direction:column;gap:12px}',
    // messages
    '.m{display:flex;flex-direction:column;gap:8px;max-width:100%}',
    '.u{align-self:flex-end;max-width:85%}',
    '.a{align-self:flex-start;width:100%}',
    '.bb{padding:10px 14px;border-radius:18px;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word}',
    '.u .bb{background:var(--c);color:var(--ct);border-bottom-right-radius:4px}',
    '.a .bb{align-self:flex-start;max-width:90%;background:#fff;border:1px solid #e3e6ea;border-bottom-left-radius:4px}',
    '.a .bb a{word-break:break-all}',
    '.dots{display:inline-flex;gap:4px;padding:4px 0}',
    '.dots i{width:7px;height:7px;border-radius:50%;background:#8c959f;animation:kbf-b 1s infinite ease-in-out}',
    '.dots i:nth-child(2){animation-delay:.15s}.dots i:nth-child(3){animation-delay:.3s}',
    '@keyframes kbf-b{0%,80%,100%{opacity:.3;transform:translateY(0)}40%{opacity:1;transform:translateY(-3px)}}',
    '.er{align-self:stretch;display:flex;align-items:center;gap:10px;padding:10px 12px;border-radius:12px;background:#fff1f0;border:1px solid #ffc9c4;color:#a4190f;font-size:14px}',
    '.er span{flex:1}',
    '.sb{padding:6px 12px;border-radius:8px;background:var(--c);color:var(--ct);font-size:13px;font-weight:600;flex:none}',
    // cards
    '.cs{display:flex;flex-direction:column;gap:8px}',
    '.cd{display:grid;grid-template-columns:92px 1fr;background:#fff;border:1px solid #e3e6ea;border-radius:12px;overflow:hidden}',
    '.cd.ni{grid-template-columns:1fr}',
    '.cd img{width:92px;height:100%;min-height:92px;object-fit:cover;background:#eef0f3;display:block}',
    '.cb{padding:10px 12px;display:flex;flex-direction:column;gap:3px;min-width:0}',
    '.ch{font-weight:600;font-size:14px;line-height:1.3;overflow-wrap:anywhere}',
    '.ch a{color:#1f2328;text-decoration:none}',
    '.ch a:hover{text-decoration:underline}',
    '.mt{font-size:13px;color:#57606a;overflow-wrap:anywhere}',
    '.ex{display:-webkit-box;-webkit-line-clamp:3;-webkit-box-orient:vertical;overflow:hidden}',
    '.pr{font-weight:700;color:#1f2328}',
    '.ok{color:#1a7f37}.no{color:#b42318}',
    '.row{display:flex;flex-wrap:wrap;align-items:center;gap:4px 10px}',
    '.cta{align-self:flex-start;margin-top:6px;padding:6px 12px;border-radius:8px;background:var(--c);color:var(--ct);font-size:13px;font-weight:600;text-decoration:none}',
    '.cta:hover{filter:brightness(1.08)}',
    // sources
    '.src{font-size:12.5px;color:#57606a;padding:0 4px}',
    '.sh{font-weight:600;text-transform:uppercase;letter-spacing:.04em;font-size:11px;margin-bottom:2px}',
    '.src ol{padding-left:18px}',
    '.src li{margin:1px 0;overflow-wrap:anywhere}',
    // feedback
    '.fb{display:flex;align-items:center;gap:6px;padding:0 2px;font-size:13px;color:#57606a}',
    '.fbb{width:32px;height:28px;border-radius:999px;border:1px solid #d8dde3;background:#fff;font-size:14px;line-height:1}',
    '.fbb:hover:not(:disabled){background:#f0f2f5}',
    '.fbb[aria-pressed=true]{border-color:var(--cd);background:#eef2ff}',
    '.cm{display:flex;flex-direction:column;gap:6px;padding:10px;background:#fff;border:1px solid #e3e6ea;border-radius:12px}',
    '.cm textarea{width:100%;resize:vertical;min-height:56px;padding:8px 10px;border:1px solid #c9d1d9;border-radius:8px;font-size:14px;background:#fff}',
    '.cm div{display:flex;gap:8px;justify-content:flex-end}',
    '.gh{padding:6px 12px;border-radius:8px;font-size:13px;font-weight:600;color:#57606a}',
    '.gh:hover{background:#f0f2f5}',
    '.ty{color:#1a7f37;font-weight:500}',
    // composer
    '.f{display:flex;align-items:flex-end;gap:8px;padding:10px 12px;border-top:1px solid #e3e6ea;background:#fff;flex:none}',
    '.in{flex:1;min-width:0;resize:none;max-height:120px;padding:10px 14px;border:1px solid #c9d1d9;border-radius:20px;background:#fff;line-height:1.4;font-size:15px}',
    '.in:focus{border-color:var(--cd);outline:none;box-shadow:0 0 0 3px rgba(127,127,127,.18)}',
    '.in::placeholder{color:#6e7781}',
    '.sd{width:42px;height:42px;border-radius:50%;background:var(--c);color:var(--ct);display:flex;align-items:center;justify-content:center;flex:none}',
    '.sd svg{width:20px;height:20px;margin-left:-2px}',
    '@media (max-width:480px){.r:not(.pg) .p{inset:0;width:auto;height:auto;max-height:none;border-radius:0}.op .b{display:none}.in{font-size:16px}}',
    '@media (prefers-reduced-motion:reduce){.p,.dots i,.b{animation:none;transition:none}}'
  ].join('\n');

  // ---------------------------------------------------------------- DOM
  var host = D.createElement('kbf-widget');
  host.style.cssText = 'all:initial!important;display:block!important';
  var root = host.attachShadow({ mode: 'open' });
  try {
    var sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
    root.adoptedStyleSheets = [sheet];
  } catch (e) { root.appendChild(h('style', 0, CSS)); }

  var r = h('div', { class: 'r' + (PAGE ? ' pg' : ''), 'data-kbf': 'root', 'data-mode': PAGE ? 'page' : 'bubble' });
  var bubble = h('button', { type: 'button', class: 'b', 'data-kbf': 'bubble', 'aria-expanded': 'false', 'aria-controls': 'kbf-panel' });
  var panel = h('section', { class: 'p', id: 'kbf-panel', 'data-kbf': 'panel', 'aria-labelledby': 'kbf-title', role: PAGE ? 'region' : 'dialog' });
  var hd = h('div', { class: 'hd' });
  var logo = h('img', { class: 'lg', alt: '', 'data-kbf': 'logo', hidden: '' });
  logo.onerror = function () { logo.hidden = true; };
  var title = h('h2', { class: 'tt', id: 'kbf-title', 'data-kbf': 'title' });
  var xb = h('button', { type: 'button', class: 'x', 'data-kbf': 'close', 'aria-label': T.close, title: T.close });
  xb.appendChild(icon(I_X));
  hd.append(logo, title);
  if (!PAGE) hd.appendChild(xb);
  var log = h('div', { class: 'log', 'data-kbf': 'log', role: 'log', 'aria-live': 'polite', 'aria-relevant': 'additions text', tabindex: '0', 'aria-label': 'Conversation' });
  var welcome = h('div', { class: 'm a', 'data-kbf': 'welcome' });
  var wb = h('div', { class: 'bb' });
  welcome.appendChild(wb);
  log.appendChild(welcome);
  var form = h('form', { class: 'f', 'data-kbf': 'form' });
  var input = h('textarea', { class: 'in', rows: '1', 'data-kbf': 'input', 'aria-label': T.msg, maxlength: '2000', enterkeyhint: 'send' });
  var send = h('button', { type: 'submit', class: 'sd', 'data-kbf': 'send', 'aria-label': T.send, title: T.send });
  send.appendChild(icon(I_SEND));
  form.append(input, send);
  panel.append(hd, log, form);
  if (!PAGE) { panel.hidden = true; r.appendChild(bubble); }
  r.appendChild(panel);
  root.appendChild(r);

  function setIcon(open) {
    bubble.textContent = '';
    bubble.appendChild(icon(open ? I_DOWN : I_CHAT));
    bubble.setAttribute('aria-label', open ? T.close : T.open + ': ' + (cfg.title || DEF.title));
  }

  function render() {
    var c = rgbOf(cfg.color) || rgbOf(DEF.color), L = lum(c);
    var ct = ratio(1, L) >= ratio(L, lum([17, 24, 39])) ? '#fff' : '#111827';
    var d = c.slice();
    while (ratio(1, lum(d)) < 4.5) d = d.map(function (v) { return Math.floor(v * 0.9); });
    r.style.setProperty('--c', 'rgb(' + c + ')');
    r.style.setProperty('--ct', ct);
    r.style.setProperty('--cd', 'rgb(' + d + ')');
    r.classList.toggle('l', cfg.position === 'bottom-left');
    title.textContent = cfg.title || DEF.title;
    var lg = safe(cfg.logo);
    if (lg) { logo.src = lg; logo.hidden = false; } else logo.hidden = true;
    rich(wb, cfg.welcome);
    welcome.hidden = !cfg.welcome;
    input.placeholder = cfg.placeholder || DEF.placeholder;
    setIcon(isOpen);
    if (srcList) srcList.forEach(function (s) { s.hidden = !cfg.show_sources; });
  }

  // ---------------------------------------------------------------- open / close
  var isOpen = PAGE;
  function open(focus) {
    if (isOpen) return;
    isOpen = true;
    panel.hidden = false;
    r.classList.add('op');
    bubble.setAttribute('aria-expanded', 'true');
    setIcon(true);
    down(true);
    if (focus !== false) setTimeout(function () { input.focus(); }, 30);
  }
  function close() {
    if (PAGE || !isOpen) return;
    var inside = root.activeElement && panel.contains(root.activeElement);
    isOpen = false;
    panel.hidden = true;
    r.classList.remove('op');
    bubble.setAttribute('aria-expanded', 'false');
    setIcon(false);
    if (inside || W.matchMedia('(max-width:480px)').matches) bubble.focus();
  }
  bubble.onclick = function () { isOpen ? close() : open(); };
  xb.onclick = function () { close(); };
  panel.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && !PAGE) { e.stopPropagation(); close(); bubble.focus(); }
  });

  function down(force) {
    if (force || log.scrollHeight - log.scrollTop - log.clientHeight < 120) log.scrollTop = log.scrollHeight;
  }

  // ---------------------------------------------------------------- network
  function post(path, body, opts) {
    return fetch(EP + path, Object.assign({
      method: 'POST', credentials: 'omit', mode: 'cors',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body)
    }, opts || {}));
  }
  async function fail(res) {
    var j = null;
    try { j = await res.json(); } catch (e) { /* not JSON */ }
    var er = (j && j.error) || {};
    return {
      http: res.status, fatal: true, message: er.message,
      code: er.code || (res.status === 429 ? 'rate_limited' : 'http_' + res.status),
      retry: retryAfter(res.headers.get('Retry-After')) || er.retry_after
    };
  }
  async function chatJSON(body, signal) {
    var res = await post('chat', Object.assign({}, body, { stream: false }), { signal: signal });
    if (!res.ok) throw await fail(res);
    return res.json();
  }
  // POST + ReadableStream SSE parser. Resolves with the `done` payload.
  async function chatStream(body, onTok, signal) {
    var res = await post('chat', Object.assign({}, body, { stream: true }), {
      signal: signal, headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' }
    });
    if (!res.ok) throw await fail(res);
    var ct = res.headers.get('Content-Type') || '';
    if (ct.indexOf('event-stream') < 0) {
      if (ct.indexOf('json') >= 0) return res.json(); // server chose not to stream
      throw { fallback: true };
    }
    if (!res.body || !res.body.getReader || !W.TextDecoder) throw { fallback: true };
    var rd = res.body.getReader(), dec = new TextDecoder(), buf = '';
    for (;;) {
      var chunk = await rd.read();
      if (chunk.done) break;
      buf = (buf + dec.decode(chunk.value, { stream: true })).replace(/\r\n|\r(?!$)/g, '\n');
      var i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        var block = buf.slice(0, i), ev = 'message', data = [], d = null;
        buf = buf.slice(i + 2);
        block.split('\n').forEach(function (l) {
          if (l.slice(0, 6) === 'event:') ev = l.slice(6).trim();
          else if (l.slice(0, 5) === 'data:') data.push(l.slice(5).replace(/^ /, ''));
        });
        try { d = JSON.parse(data.join('\n')); } catch (e) { /* keep null */ }
        if (ev === 'token' && d && d.t) onTok(String(d.t));
        else if (ev === 'done') { rd.cancel().catch(function () {}); return d || {}; }
        else if (ev === 'error') {
          var er = (d && d.error) || {};
          throw { fatal: true, code: er.code || 'error', message: er.message, retry: er.retry_after };
        }
      }
    }
    throw { ended: true };
  }

  // ---------------------------------------------------------------- conversation
  var hist = [];
  var SKEY = 'kbf_sid_' + key;
  var sid = store(SKEY);
  var busy = false;
  var srcList = [];

  function addUser(text) {
    var m = h('div', { class: 'm u', 'data-kbf': 'msg-user' });
    m.appendChild(h('div', { class: 'bb' }, text));
    log.appendChild(m);
    down(true);
  }
  function errorBox(e, text) {
    var msg;
    if (e && e.code === 'rate_limited') msg = e.retry ? T.rate.replace('{n}', e.retry) : T.rate0;
    else if (e && e.fatal && e.message && !(e.http >= 500)) msg = e.message;
    else if (e && e.cut) msg = T.cut;
    else if (e && (e.http || e.fatal)) msg = T.err;
    else msg = T.net;
    var box = h('div', { class: 'er', role: 'alert', 'data-kbf': 'error', 'data-code': (e && e.code) || 'network' });
    box.appendChild(h('span', 0, msg));
    var b = h('button', { type: 'button', class: 'sb', 'data-kbf': 'retry' }, T.retry);
    b.onclick = function () { box.remove(); ask(text, true); };
    box.appendChild(b);
    log.appendChild(box);
    down(true);
  }

  function card(c) {
    if (!c || typeof c !== 'object') return null;
    var type = ['product', 'event', 'article'].indexOf(c.type) >= 0 ? c.type : 'article';
    var el = h('div', { class: 'cd', 'data-kbf': 'card', 'data-type': type });
    var im = safe(c.image);
    if (im) {
      var img = h('img', { src: im, alt: c.title || '', loading: 'lazy', decoding: 'async', 'data-kbf': 'card-image' });
      img.onerror = function () { img.remove(); el.classList.add('ni'); };
      el.appendChild(img);
    } else el.classList.add('ni');
    var b = h('div', { class: 'cb' });
    var hd = h('div', { class: 'ch', 'data-kbf': 'card-title' });
    hd.appendChild(c.url && safe(c.url) ? link(c.url, c.title || c.url) : txt(c.title || ''));
    b.appendChild(hd);
    var row = h('div', { class: 'row mt' });
    if (type === 'event') {
      if (c.date) b.appendChild(h('div', { class: 'mt', 'data-kbf': 'card-date' }, fdate(c.date)));
      var where = [c.venue, c.city].filter(Boolean).join(' \u00b7 ');
      if (where) b.appendChild(h('div', { class: 'mt' }, where));
    }
    if (c.price != null && c.price !== '') row.appendChild(h('span', { class: 'pr', 'data-kbf': 'card-price' }, c.price));
    if (type === 'product' && c.in_stock != null) {
      row.appendChild(h('span', { class: c.in_stock ? 'ok' : 'no' }, c.in_stock ? T.inStock : T.outStock));
    }
    if (row.firstChild) b.appendChild(row);
    if (c.excerpt) b.appendChild(h('div', { class: 'mt ex' }, c.excerpt));
    var cta = c.cta && typeof c.cta === 'object' ? c.cta : null;
    if (cta && safe(cta.url)) b.appendChild(link(cta.url, cta.label || T.view, 'cta', 'cta'));
    el.appendChild(b);
    return el;
  }

  // "No exact matches": what the relaxed search found (the nearest prices, the nearest dates),
  // under the label the server gives
  function alternatives(alt) {
    if (!alt || typeof alt !== 'object' || !Array.isArray(alt.cards)) return null;
    var cards = alt.cards.map(card).filter(Boolean);
    if (!cards.length) return null;
    var w = h('div', { class: 'cs', 'data-kbf': 'alternatives' });
    if (alt.label) w.appendChild(h('div', { class: 'sh', 'data-kbf': 'alternatives-label' }, String(alt.label)));
    cards.forEach(function (c) { w.appendChild(c); });
    return w;
  }

  function sources(list) {
    var seen = {}, items = [];
    (Array.isArray(list) ? list : []).forEach(function (s) {
      if (!s || typeof s !== 'object') return;
      var k = s.document_id || s.source_url || s.document_title;
      if (seen[k]) return;
      seen[k] = 1;
      items.push(s);
    });
    if (!items.length || !cfg.show_sources) return null;
    var w = h('div', { class: 'src', 'data-kbf': 'sources' });
    w.appendChild(h('div', { class: 'sh' }, T.sources));
    var ol = h('ol');
    items.slice(0, 5).forEach(function (s) {
      var li = h('li', { 'data-kbf': 'source', title: s.snippet ? String(s.snippet).slice(0, 300) : null });
      li.appendChild(link(s.source_url, s.document_title || s.source_url || s.document_id || '?'));
      if (s.pages) li.appendChild(txt(' \u00b7 ' + T.page + ' ' + s.pages));
      ol.appendChild(li);
    });
    w.appendChild(ol);
    srcList.push(w);
    return w;
  }

  function feedback(mid) {
    var row = h('div', { class: 'fb', 'data-kbf': 'feedback' });
    var up = h('button', { type: 'button', class: 'fbb', 'data-kbf': 'thumb-up', 'aria-label': T.up, title: T.up, 'aria-pressed': 'false' }, '\ud83d\udc4d');
    var dn = h('button', { type: 'button', class: 'fbb', 'data-kbf': 'thumb-down', 'aria-label': T.down, title: T.down, 'aria-pressed': 'false' }, '\ud83d\udc4e');
    var box = null, ta = null;
    row.append(up, dn);
    function rate(rating, comment) {
      var had = root.activeElement && (row.contains(root.activeElement) || (box && box.contains(root.activeElement)));
      var btns = [up, dn].concat(box ? Array.prototype.slice.call(box.querySelectorAll('button,textarea')) : []);
      btns.forEach(function (b) { b.disabled = true; });
      (rating === 'up' ? up : dn).setAttribute('aria-pressed', 'true');
      post('feedback', { message_id: mid, rating: rating, comment: comment || undefined }).then(function (res) {
        if (!res.ok) throw res;
        if (box) box.remove();
        row.textContent = '';
        row.appendChild(h('span', { class: 'ty', role: 'status', 'data-kbf': 'thanks' }, T.thanks));
        if (had) input.focus();
      }).catch(function () {
        btns.forEach(function (b) { b.disabled = false; });
        up.setAttribute('aria-pressed', 'false');
        var n = row.querySelector('.fe') || row.appendChild(h('span', { class: 'fe', role: 'status' }));
        n.textContent = T.fbErr;
      });
    }
    up.onclick = function () { rate('up'); };
    dn.onclick = function () {
      if (box) { ta.focus(); return; }
      dn.setAttribute('aria-pressed', 'true');
      box = h('form', { class: 'cm', 'data-kbf': 'comment-form' });
      ta = h('textarea', { 'data-kbf': 'comment', rows: '2', maxlength: '1000', 'aria-label': T.cmLabel, placeholder: T.cmPh });
      var act = h('div');
      var sk = h('button', { type: 'button', class: 'gh', 'data-kbf': 'comment-skip' }, T.skip);
      var sb = h('button', { type: 'submit', class: 'sb', 'data-kbf': 'comment-send' }, T.cmSend);
      act.append(sk, sb);
      box.append(ta, act);
      box.onsubmit = function (e) { e.preventDefault(); rate('down', ta.value.trim()); };
      sk.onclick = function () { rate('down'); };
      ta.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); box.requestSubmit ? box.requestSubmit() : box.onsubmit(e); }
      });
      row.after(box);
      down();
      ta.focus();
    };
    return row;
  }

  async function ask(text, isRetry) {
    text = String(text == null ? '' : text).trim();
    if (!text || busy) return false;
    busy = true;
    send.disabled = true;
    if (!isRetry) addUser(text);
    var m = h('div', { class: 'm a', 'data-kbf': 'msg-bot', 'aria-busy': 'true' });
    var ans = h('div', { class: 'bb', 'data-kbf': 'answer' });
    var dots = h('span', { class: 'dots', 'data-kbf': 'typing', role: 'img', 'aria-label': T.typing });
    dots.append(h('i'), h('i'), h('i'));
    ans.appendChild(dots);
    m.appendChild(ans);
    log.appendChild(m);
    down(true);

    var body = { message: text, history: hist.slice(-6) };
    if (sid) body.session_id = sid;
    var acc = '', raf = 0, res = null, err = null;
    var ctl = W.AbortController ? new AbortController() : null;
    var timer = setTimeout(function () { if (ctl) ctl.abort(); }, 120000);
    function paint() { raf = 0; rich(ans, acc); down(); }
    function onTok(t) {
      acc += t;
      if (!raf) raf = (W.requestAnimationFrame || setTimeout)(paint);
    }
    try {
      res = await chatStream(body, onTok, ctl && ctl.signal);
    } catch (e) {
      if (e && e.fatal) err = e;
      else if (!acc) {
        try { res = await chatJSON(body, ctl && ctl.signal); } catch (e2) { err = e2; }
      } else if (e && e.ended) res = { answer: acc };
      else err = { cut: true };
    }
    clearTimeout(timer);
    m.removeAttribute('aria-busy');
    if (err || !res) {
      if (acc) { rich(ans, acc); } else m.remove();
      errorBox(err, text);
    } else {
      var answer = typeof res.answer === 'string' && res.answer ? res.answer : acc;
      rich(ans, answer);
      if (res.session_id && res.session_id !== sid) { sid = String(res.session_id); store(SKEY, sid); }
      var cards = Array.isArray(res.cards) ? res.cards.map(card).filter(Boolean) : [];
      if (cards.length) {
        var cs = h('div', { class: 'cs', 'data-kbf': 'cards' });
        cards.forEach(function (c) { cs.appendChild(c); });
        m.appendChild(cs);
      }
      var alt = alternatives(res.alternatives);
      if (alt) m.appendChild(alt);
      var sr = sources(res.sources);
      if (sr) m.appendChild(sr);
      if (res.message_id) {
        m.setAttribute('data-message-id', res.message_id);
        m.appendChild(feedback(res.message_id));
      }
      hist.push({ role: 'user', content: text }, { role: 'assistant', content: answer });
      hist = hist.slice(-6);
      // Show as much of the new answer as fits, without scrolling its start out of view.
      var top = m.offsetTop - log.offsetTop - 8;
      log.scrollTop = Math.max(log.scrollTop, Math.min(log.scrollHeight - log.clientHeight, top));
    }
    busy = false;
    send.disabled = false;
    return !err;
  }

  form.addEventListener('submit', function (e) {
    e.preventDefault();
    if (busy || !input.value.trim()) return;
    var v = input.value;
    input.value = '';
    grow();
    ask(v);
  });
  function grow() {
    input.style.height = 'auto';
    input.style.height = Math.min(input.scrollHeight + 2, 120) + 'px';
  }
  input.addEventListener('input', grow);
  input.addEventListener('keydown', function (e) {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit ? form.requestSubmit() : form.dispatchEvent(new Event('submit', { cancelable: true }));
    }
  });

  // ---------------------------------------------------------------- boot
  render();
  function mount() {
    (D.body || D.documentElement).appendChild(host);
    if (PAGE || ds.open === 'true') { isOpen = false; open(false); }
  }
  if (D.body) mount(); else D.addEventListener('DOMContentLoaded', mount);

  function ready() { r.classList.add('rdy'); }
  if (ds.config === 'inline' || !key) ready();
  else {
    var t = setTimeout(ready, 2500);
    fetch(EP + 'config', { credentials: 'omit', headers: { Accept: 'application/json' } })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (c) { if (c && typeof c === 'object') { cfg = merge(DEF, c, ATTR); render(); } })
      .catch(function () {})
      .then(function () { clearTimeout(t); ready(); });
  }

  W.KBFWidget = {
    version: '1.0.0',
    open: function () { open(); },
    close: close,
    send: function (text) { open(false); return ask(text); },
    root: root
  };
})();
