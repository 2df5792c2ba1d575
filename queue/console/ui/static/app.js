// sheaf console: shows times in the viewer's zone, refreshes the live
// parts of a page while its tab is shown, and sends actions to the API.
// Plain script, no dependencies; the page works without it, read-only.
"use strict";
(function () {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const full = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
    second: "2-digit", hour12: false, timeZoneName: "short",
  });
  const hm = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", hour12: false });

  // localise shows every time under root in the viewer's zone.
  function localise(root) {
    root.querySelectorAll("[data-local]").forEach((el) => {
      const iso = el.getAttribute("datetime") || el.getAttribute("data-datetime");
      const d = new Date(iso);
      if (isNaN(d)) return;
      el.textContent = el.getAttribute("data-local") === "hm" ? hm.format(d) : full.format(d);
      if (el.tagName === "TIME") el.title = d.toISOString();
    });
    relative(root);
  }

  // relWords says how far d is from now, as the server's relWords does.
  function relWords(d) {
    const ms = d.getTime() - Date.now();
    const ahead = ms > 0, abs = Math.abs(ms), min = 60000, hour = 60 * min;
    let s;
    if (abs < 45000) return ahead ? "in a moment" : "just now";
    if (abs < 90 * min) s = Math.round(abs / min) + " min";
    else if (abs < 36 * hour) s = Math.round(abs / hour) + " h";
    else s = Math.round(abs / (24 * hour)) + " days";
    return ahead ? "in " + s : s + " ago";
  }

  // relative keeps every relative time under root current, its absolute
  // time in the viewer's zone in its title.
  function relative(root) {
    root.querySelectorAll("time[data-rel]").forEach((el) => {
      const d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      el.textContent = relWords(d);
      el.title = full.format(d);
    });
  }

  const flash = () => document.getElementById("flash");
  function say(msg, bad) {
    const f = flash();
    if (!f) return;
    f.classList.toggle("bad", !!bad);
    f.textContent = msg;
  }

  // sayDone reports an action's result, with a link to its audit entry
  // when the answer names one (a bulk action's does).
  function sayDone(msg, out) {
    say(msg);
    if (!out || !out.audit_url) return;
    const a = document.createElement("a");
    a.href = out.audit_url;
    a.id = "flash-audit";
    a.textContent = "The audit log has it.";
    flash().append(" ", a);
  }

  // ask shows the page's confirmation dialog: the question, what it
  // touches in words, a preview of the first jobs, and the label of the
  // button that goes ahead; it resolves to whether that was pressed.
  function ask(question, detail, preview, ok) {
    const dlg = document.getElementById("confirm");
    if (!dlg || !dlg.showModal) return Promise.resolve(confirm(question));
    document.getElementById("confirm-q").textContent = question;
    document.getElementById("confirm-detail").textContent = detail || "";
    document.getElementById("confirm-preview").replaceChildren(...(preview || []).map((text) => {
      const li = document.createElement("li");
      li.textContent = text;
      return li;
    }));
    document.getElementById("confirm-ok").textContent = ok || "OK";
    dlg.returnValue = "";
    return new Promise((resolve) => {
      dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
      dlg.showModal();
    });
  }

  // preview lists the first jobs a count URL counts, in words.
  async function preview(countURL, n) {
    const out = await api("GET", countURL.replace("api/jobs/count?", "api/jobs?") + "&limit=" + n);
    return out.jobs;
  }
  function previewLine(j) { return "#" + j.id + " " + j.kind + " on " + j.queue + (j.last_error ? ": " + j.last_error : ""); }

  // followUp adds to an action's result what the jobs it retried (ids,
  // the first ten of total) have done since, read again each second until
  // none is left to run or a minute has passed, or the result is replaced.
  function followUp(ids, total) {
    ids = ids.slice(0, 10);
    if (!ids.length || !flash()) return;
    const line = document.createElement("span");
    line.id = "flash-after";
    flash().append(" ", line);
    const until = Date.now() + 60000;
    const tick = async () => {
      if (!line.isConnected) return;
      let got;
      try { got = await Promise.all(ids.map((id) => api("GET", "api/jobs/" + id))); } catch (e) { return; }
      const n = {};
      got.forEach((r) => { n[r.job.status] = (n[r.job.status] || 0) + 1; });
      const left = (n.QUEUED || 0) + (n.PROCESSING || 0);
      const parts = [];
      if (n.COMPLETED) parts.push(n.COMPLETED + " completed");
      if (n.FAILED) parts.push(n.FAILED + " failed again");
      if (n.CANCELLED) parts.push(n.CANCELLED + " cancelled");
      if (left) parts.push(left + " still to run");
      line.textContent = "Since then" + (total > ids.length ? ", of the first " + ids.length : "") + ": " + parts.join(", ") + ".";
      if (left && Date.now() < until) setTimeout(tick, 1000);
    };
    tick();
  }

  // api calls the console's API; it resolves to the decoded body, or
  // rejects with the API's error message.
  async function api(method, url, body) {
    const opts = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(url, opts);
    let data = null;
    try { data = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) {
      throw new Error((data && data.error && data.error.message) || res.status + " " + res.statusText);
    }
    return data;
  }

  // refresh replaces the page's live regions with the server's current
  // ones, keeping the jobs that were selected.
  let refreshing = false;
  async function refresh() {
    if (refreshing) return;
    refreshing = true;
    try {
      const res = await fetch(location.href, { headers: { Accept: "text/html" }, cache: "no-store", credentials: "same-origin" });
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const selected = new Set([...document.querySelectorAll('input[name="id"]:checked')].map((c) => c.value));
      document.querySelectorAll("[data-live-region][id]").forEach((old) => {
        const fresh = doc.getElementById(old.id);
        if (!fresh) return;
        old.querySelectorAll("details[open]").forEach((d, i) => {
          const fd = fresh.querySelectorAll("details")[i];
          if (fd) fd.open = true;
        });
        fresh.querySelectorAll('input[name="id"]').forEach((c) => { c.checked = selected.has(c.value); });
        const typing = keepTyped(old, fresh);
        old.replaceWith(document.adoptNode(fresh));
        typing();
      });
      const main = document.getElementById("main");
      const freshMain = doc.getElementById("main");
      if (main && freshMain) setLive(Number(freshMain.getAttribute("data-live")) || 0);
      localise(document);
    } catch (e) {
      // The server is away: try again at the next tick.
    } finally {
      refreshing = false;
    }
  }

  // keepTyped carries what the operator typed in the fields of a live
  // region (a reason, a filter) into its fresh copy, so that a refresh
  // does not wipe it; the function it returns, called once the fresh copy
  // is in the page, gives the focus and the caret back to the field that
  // had them.
  function keepTyped(old, fresh) {
    old.querySelectorAll("input[id], textarea[id], select[id]").forEach((f) => {
      if (f.type === "checkbox" || f.type === "radio" || f.type === "hidden") return;
      const changed = f.tagName === "SELECT" ? [...f.options].some((o) => o.selected !== o.defaultSelected) : f.value !== f.defaultValue;
      const ff = fresh.querySelector("#" + CSS.escape(f.id));
      if (changed && ff && ff.tagName === f.tagName) ff.value = f.value;
    });
    const active = document.activeElement;
    if (!active || !active.id || !old.contains(active)) return () => {};
    const { id, selectionStart: start, selectionEnd: end } = active;
    return () => {
      const el = document.getElementById(id);
      if (!el) return;
      el.focus();
      try { if (start !== null) el.setSelectionRange(start, end); } catch (e) { /* a field without a caret */ }
    };
  }

  let timer = 0, every = 0;
  function setLive(ms) {
    if (ms === every) return;
    every = ms;
    clearInterval(timer);
    timer = 0;
    if (ms > 0) timer = setInterval(() => { if (!document.hidden) refresh(); }, ms);
  }
  document.addEventListener("visibilitychange", () => { if (!document.hidden && every > 0) refresh(); });

  async function act(button, run) {
    button.disabled = true;
    try {
      await run();
      await refresh();
    } catch (e) {
      say(e.message, true);
    } finally {
      button.disabled = false;
    }
  }

  // changedOf is ids less those a bulk answer out refused.
  function changedOf(ids, out) {
    const refused = new Set((out.refused || []).map((r) => r.id));
    return ids.filter((id) => !refused.has(id));
  }

  // jobs counts jobs in words: "1 job", "3 jobs".
  function jobs(n) { return n + (n === 1 ? " job" : " jobs"); }

  // withReason adds to body the reason typed in the field a button's
  // data-reason names, if one is.
  function withReason(b, body) {
    const field = b.dataset.reason && document.getElementById(b.dataset.reason);
    const reason = field ? field.value.trim() : "";
    return reason ? Object.assign(body || {}, { reason }) : body;
  }

  function selectedIDs() {
    return [...document.querySelectorAll('input[name="id"]:checked')].map((c) => Number(c.value));
  }

  document.addEventListener("click", async (ev) => {
    const b = ev.target.closest("button[data-post], button[data-bulk], button[data-match]");
    if (!b) return;
    ev.preventDefault();
    if (b.hasAttribute("data-post")) {
      if (b.dataset.confirm && !(await ask(b.dataset.confirm, "", [], b.textContent.trim()))) return;
      const body = withReason(b, b.dataset.body ? JSON.parse(b.dataset.body) : undefined);
      act(b, async () => {
        const out = await api("POST", b.dataset.post, body);
        sayDone(b.dataset.done ? b.dataset.done + (out && "changed" in out ? ": " + jobs(out.changed) + " changed" : "") : "Done", out);
        const one = b.dataset.post.match(/^api\/jobs\/(\d+)\/retry$/);
        if (one) followUp([Number(one[1])], 1);
        else if (/^api\/jobs\/retry$/.test(b.dataset.post) && body && body.ids) followUp(changedOf(body.ids, out), out.changed);
      });
    } else if (b.hasAttribute("data-bulk")) {
      const ids = selectedIDs();
      if (ids.length === 0) { say("Select jobs first.", true); return; }
      const verb = b.dataset.verb;
      if (!(await ask(verb + " " + jobs(ids.length) + "?", "The jobs selected on this page:", ids.slice(0, 10).map((id) => "#" + id)
        .concat(ids.length > 10 ? ["and " + (ids.length - 10) + " more"] : []), verb + " " + jobs(ids.length)))) return;
      act(b, async () => {
        const out = await api("POST", b.dataset.bulk, withReason(b, { ids }));
        const refused = (out.refused || []).length;
        sayDone(verb + ": " + jobs(out.changed) + " changed" + (refused ? ", " + refused + " refused (" + out.refused[0].error.message + ")" : "") + ".", out);
        if (verb === "Retry") followUp(changedOf(ids, out), out.changed);
      });
    } else {
      act(b, async () => {
        const { count } = await api("GET", b.dataset.count);
        if (count === 0) { say("No " + b.dataset.what + " job matches the filters."); return; }
        const firstJobs = await preview(b.dataset.count, 5);
        const first = firstJobs.map(previewLine);
        if (count > first.length) first.push("and " + (count - first.length) + " more");
        const what = count + " " + b.dataset.what + " job" + (count === 1 ? "" : "s");
        if (!(await ask(b.dataset.verb + " " + what + "?", "It touches " + b.dataset.words + ".", first,
          b.dataset.verb + " " + what))) return;
        const out = await api("POST", b.dataset.match, withReason(b, { filter: JSON.parse(b.dataset.body) }));
        sayDone(b.dataset.verb + ": " + jobs(out.changed) + " changed, of the " + count + " that matched" +
          (b.dataset.verb === "Retry" ? "; each runs again as its next attempt" : "") + ".", out);
        if (b.dataset.verb === "Retry") followUp(firstJobs.map((j) => j.id), out.changed);
      });
    }
  });

  // A limit's Change button fills the limit form with it.
  document.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-edit-limit]");
    const form = document.getElementById("limit-form");
    if (!b || !form) return;
    const l = JSON.parse(b.dataset.editLimit);
    for (const [name, v] of Object.entries(l)) {
      if (form.elements[name]) {
        form.elements[name].value = name === "per_seconds" && !v ? 60 : typeof v === "object" ? JSON.stringify(v) : String(v);
      }
    }
    form.scrollIntoView({ block: "nearest" });
    form.elements.concurrency.focus();
  });

  // A form with data-api posts its fields to the API as JSON: numbers
  // as numbers, data-type="bool" fields as booleans, data-type="json"
  // fields as what they hold (nothing when empty).
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (!form.matches("form[data-api]")) return;
    ev.preventDefault();
    const body = {};
    for (const el of form.elements) {
      if (!el.name) continue;
      if (el.dataset.type === "json") {
        if (el.value) body[el.name] = JSON.parse(el.value);
        continue;
      }
      body[el.name] = el.type === "number" ? Number(el.value || 0) : el.dataset.type === "bool" ? el.value === "true" : el.value;
    }
    act(form.querySelector('button[type="submit"]'), async () => {
      await api("POST", form.dataset.api, body);
      say(form.dataset.done + ": " + body.scope + " " + body.target + ".");
      form.reset();
      form.querySelectorAll('[data-type="bool"]').forEach((el) => { el.value = "false"; });
      form.querySelectorAll('[data-type="json"]').forEach((el) => { el.value = ""; });
    });
  });

  document.addEventListener("change", (ev) => {
    if (ev.target.matches("input[data-select-all]")) {
      document.querySelectorAll('input[name="id"]').forEach((c) => { c.checked = ev.target.checked; });
    }
  });

  // The filter form sends only the fields that are filled in.
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (!form.matches("form.filters")) return;
    form.querySelectorAll("input, select").forEach((el) => {
      if (el.type !== "checkbox" && el.value === "") el.disabled = true;
    });
    const tz = form.querySelector("[data-tz]");
    const hasTime = [...form.querySelectorAll('input[type="datetime-local"]')].some((el) => el.value !== "");
    if (tz && !hasTime) tz.disabled = true;
  });

  document.addEventListener("DOMContentLoaded", () => {
    const z = document.getElementById("zone");
    if (z) z.textContent = "Times in " + zone;
    document.querySelectorAll("[data-tz]").forEach((el) => { if (!el.value) el.value = zone; });
    // On a phone the filters start folded, unless some are set.
    const box = document.getElementById("filter-box");
    if (box && window.matchMedia("(max-width: 600px)").matches && !box.querySelector("summary").textContent.includes("(set)")) box.open = false;
    localise(document);
    setInterval(() => { if (!document.hidden) relative(document); }, 15000);
    const main = document.getElementById("main");
    if (main) setLive(Number(main.getAttribute("data-live")) || 0);
  });
})();
