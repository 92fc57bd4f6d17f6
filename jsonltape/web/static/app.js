// jsonltape serve: the little script the pages use. Every page reads without it; this adds
// search as you type, live updates, "new since you last looked", copy as JSON and keys.
// Hand-written, no dependencies, no inline handlers (the Content-Security-Policy forbids them).

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// -- search as you type ------------------------------------------------------------------
function searchAsYouType() {
  const form = $("#search-form");
  const input = $("#q");
  const results = $("#results");
  if (!form || !input || !results) return;
  let pending = null;
  let selected = -1;
  const hits = () => $$("a.hit", results);
  const select = (i) => {
    const list = hits();
    list.forEach((a) => a.classList.remove("sel"));
    selected = Math.max(-1, Math.min(i, list.length - 1));
    if (selected >= 0) list[selected].classList.add("sel");
  };
  const run = async () => {
    const params = new URLSearchParams(new FormData(form));
    if (pending) pending.abort();
    pending = new AbortController();
    try {
      const response = await fetch("/search/results?" + params, { signal: pending.signal });
      if (!response.ok) return;
      results.innerHTML = await response.text();  // our server's escaped HTML
      selected = -1;
      history.replaceState(null, "", "/search?" + params);
      document.body.dataset.searched = params.get("q") || "";
    } catch (err) {
      if (err.name !== "AbortError") throw err;
    }
  };
  form.addEventListener("input", run);
  form.addEventListener("change", run);
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowDown") { select(selected + 1); ev.preventDefault(); }
    else if (ev.key === "ArrowUp") { select(selected - 1); ev.preventDefault(); }
    else if (ev.key === "Enter") {
      const list = hits();
      if (list.length) { ev.preventDefault(); location.href = list[Math.max(selected, 0)].href; }
    }
  });
}

// -- a permalink to a seq on another page of the transcript ------------------------------
function permalink() {
  const t = $("#transcript");
  const m = /^#seq-(\d+)$/.exec(location.hash);
  if (!t || !m || document.getElementById("seq-" + m[1])) return;
  const url = new URL(location.href);
  if (url.searchParams.get("around") === m[1]) return;  // not on any page: do not loop
  url.searchParams.delete("from");
  url.searchParams.delete("page");
  url.searchParams.set("around", m[1]);
  location.replace(url.toString());
}

// -- "new since you last looked" ---------------------------------------------------------
function seenKey(t) { return "jsonltape:seen:" + t.dataset.session; }
function lastSeq(t) {
  const seqs = $$("[data-seq]", t).map((e) => Number(e.dataset.seq));
  return seqs.length ? Math.max(...seqs) : -1;
}
function markNew() {
  const t = $("#transcript");
  if (!t) return;
  let seen = null;
  try { seen = localStorage.getItem(seenKey(t)); } catch (e) { /* storage off */ }
  if (seen !== null) {
    const first = $$(":scope > [data-seq]", t).find((e) => Number(e.dataset.seq) > Number(seen));
    if (first) {
      const marker = document.createElement("div");
      marker.className = "new-marker";
      marker.id = "new-since";
      marker.textContent = "new since you last looked";
      first.before(marker);
    }
  }
  remember(t);
}
function remember(t) {
  const top = lastSeq(t);
  try {
    const old = Number(localStorage.getItem(seenKey(t)) ?? -1);
    if (top > old) localStorage.setItem(seenKey(t), String(top));
  } catch (e) { /* storage off */ }
}

// -- live: follow new events over server-sent events -------------------------------------
function live() {
  const t = $("#transcript");
  const state = $("#live-state");
  if (!t || !t.dataset.live) return;
  let url = new URL(t.dataset.live, location.href);
  let from = Number(url.searchParams.get("from"));
  let crc = url.searchParams.get("crc") || "";
  let source = null;
  const open = () => {
    url.searchParams.set("from", String(from));
    url.searchParams.set("crc", crc);
    source = new EventSource(url.toString());
    source.addEventListener("block", (ev) => {
      const data = JSON.parse(ev.data);
      const near = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
      const holder = document.createElement("div");
      holder.innerHTML = data.html;  // rendered and escaped by our server
      const node = holder.firstElementChild;
      if (!node) return;
      node.classList.add("new");
      const call = data.call_id ? $$("details.call", t).find((d) => d.dataset.callId === data.call_id) : null;
      const none = $("#no-events", t);
      if (none) none.remove();
      if (call) {
        $(".results", call).append(node);
      } else {
        t.append(node);
      }
      if (near) node.scrollIntoView({ block: "end" });
      if (document.visibilityState === "visible") remember(t);
    });
    source.addEventListener("seq", (ev) => {
      const at = JSON.parse(ev.data);
      from = at.seq + 1;
      crc = at.crc;
    });
    source.addEventListener("gone", (ev) => {
      state.textContent = ev.data;
      state.classList.add("gone");
      source.close();
    });
    source.onerror = () => {
      // reconnect from the next unseen seq (EventSource would replay from the first one)
      source.close();
      if (!state.classList.contains("gone")) setTimeout(open, 1000);
    };
  };
  open();
}

// -- time travel: the slider moves, the page follows; copy as JSON ------------------------
function travel() {
  const form = $("#travel");
  if (form) {
    const range = $("#seq-range");
    const number = $("#seq-number");
    range.addEventListener("input", () => { number.value = range.value; });
    range.addEventListener("change", () => form.submit());
    number.addEventListener("change", () => { range.value = number.value; form.submit(); });
    $$("input[type=radio]", form).forEach((r) => r.addEventListener("change", () => form.submit()));
  }
  const copy = $("#copy-json");
  if (copy) {
    copy.hidden = false;
    copy.addEventListener("click", async () => {
      const status = $("#copy-state");
      // the whole request, as the download gives it (the page may show only its start)
      const text = fetch(copy.dataset.source).then((r) => r.text());
      try {
        await navigator.clipboard.write([new ClipboardItem({ "text/plain": text.then((t) => new Blob([t], { type: "text/plain" })) })]);
        status.textContent = "copied";
      } catch (e) {
        try {
          await navigator.clipboard.writeText(await text);
          status.textContent = "copied";
        } catch (e2) {
          const range = document.createRange();
          range.selectNodeContents($("#" + copy.dataset.copy));
          getSelection().removeAllRanges();
          getSelection().addRange(range);
          status.textContent = "selected: press Ctrl+C";
        }
      }
    });
  }
}

// -- keys ----------------------------------------------------------------------------------
function keys() {
  document.addEventListener("keydown", (ev) => {
    const tag = (ev.target.tagName || "").toLowerCase();
    if (["input", "select", "textarea"].includes(tag) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "/") {
      const box = $("#q") || $("#quick-q");
      if (box) { box.focus(); box.select(); ev.preventDefault(); }
      return;
    }
    if (ev.key === "g") { window.scrollTo(0, 0); return; }
    if (ev.key === "G") { window.scrollTo(0, document.body.scrollHeight); return; }
    if (ev.key !== "j" && ev.key !== "k") return;
    const prompts = $$("#transcript article.msg.user");
    if (!prompts.length) return;
    // from the prompt jumped to last, else from where the page is scrolled
    const at = prompts.findIndex((p) => p.dataset.seq === document.body.dataset.prompt);
    let i;
    if (at >= 0) {
      i = ev.key === "j" ? Math.min(at + 1, prompts.length - 1) : Math.max(at - 1, 0);
    } else {
      const y = window.scrollY + 70;
      const below = prompts.findIndex((p) => p.getBoundingClientRect().top + window.scrollY > y);
      i = ev.key === "j" ? (below < 0 ? prompts.length - 1 : below) : Math.max((below < 0 ? prompts.length : below) - 1, 0);
    }
    const next = prompts[i];
    if (next) {
      next.scrollIntoView({ block: "start" });
      window.scrollBy(0, -60);
      next.setAttribute("tabindex", "-1");
      next.focus({ preventScroll: true });
      document.body.dataset.prompt = next.dataset.seq;
    }
  });
}

permalink();
searchAsYouType();
markNew();
live();
travel();
keys();
