// The decision page: filter, tick, confirm with the counts, answer through the rebalance plugin (which refuses an
// unknown group before it answers Airflow), then show the decision. As a file (no plugin) it only filters and ticks.
(function () {
  "use strict";
  const PAGE = 200;  // rows drawn at a time: 10,000 groups stay fast
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const rows = Array.from(document.querySelectorAll("#choices tbody tr"));
  const filters = document.getElementById("filters");
  const count = document.getElementById("shown-count");
  const more = document.getElementById("more");
  const selection = document.getElementById("selection");
  const selectionWarning = document.getElementById("selection-warning");
  const form = document.getElementById("answer-form");
  const dialog = document.getElementById("confirm");
  const state = document.getElementById("state");
  const live = location.protocol.startsWith("http");
  let limit = PAGE;
  let pending = null;

  function glob(pattern) {
    const text = pattern.trim();
    if (!text) return null;
    if (!/[*?]/.test(text)) return (id) => id.toLowerCase().includes(text.toLowerCase());
    const re = new RegExp("^" + text.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".") + "$");
    return (id) => re.test(id);
  }

  // The kinds each "show" choice lists (the kind is decided once, in jobs/report/triage.py: kind).
  const SCOPES = { differs: ["change", "keep"], change: ["change"], all: ["change", "keep", "nothing"] };

  function matching() {
    const kinds = SCOPES[filters.elements.scope.value] || SCOPES.all;
    const risk = filters.elements.risk.value;
    const match = glob(filters.elements.pattern.value);
    return rows.filter((r) => kinds.includes(r.dataset.kind) && (!risk || r.dataset.risk === risk)
      && (!match || match(r.dataset.group)));
  }

  function draw() {
    const shown = matching();
    const visible = new Set(shown.slice(0, limit));
    rows.forEach((r) => { r.hidden = !visible.has(r); });
    count.textContent = `showing ${Math.min(limit, shown.length)} of ${shown.length} matching (${rows.length} awaiting a decision)`;
    more.hidden = shown.length <= limit;
    summarize();
  }

  function pasted() {
    return form.elements.paste.value.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
  }

  function chosen() {
    const ids = new Set(rows.filter((r) => r.querySelector(".pick").checked).map((r) => r.dataset.group));
    pasted().forEach((g) => ids.add(g));
    return Array.from(ids).sort();
  }

  // What approving ``ids`` does, counted as jobs/report/triage.py's scope() counts it.
  function totals(ids) {
    const picked = new Set(ids);
    const t = { moves: 0, warmups: 0, change: 0, keep: 0, nothing: 0, offered: 0, keepsLeft: 0, kip441Left: 0 };
    rows.forEach((r) => {
      if (picked.has(r.dataset.group)) {
        t.moves += Number(r.dataset.moves);
        t.warmups += Number(r.dataset.warmups);
        t[r.dataset.kind] += 1;
        t.offered += 1;
      } else if (r.dataset.kind === "keep") {
        t.keepsLeft += 1;
        t.kip441Left += Number(r.dataset.kip441);
      }
    });
    return t;
  }

  const plural = (n, word) => `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;

  // The same words as Scope.left_to_kip441 and Scope.approving (jobs/report/triage.py): tests/system/
  // test_report_browser.py checks the dialog against them.
  function leftToKip441(t) {
    return t.keepsLeft
      ? `${plural(t.keepsLeft, "keep-plan")} not selected: KIP-441 may move ${plural(t.kip441Left, "task")} there`
      : "";
  }

  function approving(ids, t) {
    const kinds = [[t.change, "changing group"], [t.keep, "keep-plan"], [t.nothing, "no-change plan"]]
      .filter(([n]) => n).map(([n, word]) => plural(n, word));
    const rest = Math.max(data.offered - t.offered, 0);
    return `Approve ${plural(ids.length, "plan")}, ${plural(t.moves, "move")}, ${plural(t.warmups, "warmup")}`
      + (kinds.length ? ` (${kinds.join(", ")})` : "") + `; reject the other ${plural(rest, "plan")}.`;
  }

  function summarize() {
    const ids = chosen();
    const t = totals(ids);
    selection.textContent = ids.length
      ? `${plural(ids.length, "plan")} selected: ${plural(t.moves, "move")}, ${plural(t.warmups, "warmup")}`
      : "no plan selected";
    selectionWarning.textContent = ids.length && t.keepsLeft ? leftToKip441(t) : "";
  }

  function ask(text, warning, answer) {
    pending = answer;
    document.getElementById("confirm-text").textContent = text;
    const warn = document.getElementById("confirm-warning");
    warn.textContent = warning ? warning + "." : "";
    warn.hidden = !warning;
    dialog.showModal();
  }

  function show(cls, html) {
    state.className = "state " + cls;
    state.innerHTML = html;
  }

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

  function describe(s) {
    if (s.state === "awaiting") {
      show("", `<p>Awaiting a decision from ${esc(s.approvers || "anyone Airflow lets answer")}; `
        + `${plural(data.offered, "plan")} offered.</p>`);
      return;
    }
    if (s.state === "decided") {
      const outcome = s.decided
        ? `${plural(s.decided.approved, "plan")} approved, ${plural(s.decided.rejected, "plan")} rejected`
        : "being recorded";
      const published = s.published === null || s.published === undefined ? "not yet published" : `${plural(s.published, "plan")} published`;
      const at = s.at ? new Date(s.at).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "an unknown time";
      show("decided", `<p><strong>Decided by ${esc(s.by)}</strong> at ${esc(at)}: ${esc(s.chosen)}`
        + `${s.selected ? ` (${plural(s.selected, "group")} selected)` : ""}; ${esc(outcome)}; ${esc(published)}.</p>`
        + (s.reason ? `<p>Note: ${esc(s.reason)}</p>` : ""));
      form.querySelectorAll("button, input, textarea").forEach((e) => { e.disabled = true; });
      rows.forEach((r) => { r.querySelector(".pick").disabled = true; });
      return;
    }
    show("", `<p>${esc(s.message || s.state)}</p>`);
  }

  async function refresh() {
    if (!live) return;
    const response = await fetch(location.pathname.replace(/\/$/, "") + "/state", { credentials: "same-origin" });
    if (response.ok) describe(await response.json());
  }

  async function send(answer) {
    const response = await fetch(location.pathname.replace(/\/$/, ""), {
      method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(answer),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      show("refused", `<p><strong>Not sent:</strong> ${esc(body.detail || response.statusText)}</p>`);
      return;
    }
    describe(body);
  }

  filters.addEventListener("input", () => { limit = PAGE; draw(); });
  more.addEventListener("click", () => { limit += PAGE; draw(); });
  document.getElementById("select-shown").addEventListener("click", () => {
    matching().forEach((r) => { r.querySelector(".pick").checked = true; });
    summarize();
  });
  document.getElementById("select-none").addEventListener("click", () => {
    rows.forEach((r) => { r.querySelector(".pick").checked = false; });
    form.elements.paste.value = "";
    summarize();
  });
  document.getElementById("choices").addEventListener("change", summarize);
  form.elements.paste.addEventListener("input", summarize);
  document.getElementById("approve").addEventListener("click", () => {
    const ids = chosen();
    if (!ids.length) { show("refused", "<p>Select at least one plan, or reject all.</p>"); return; }
    const t = totals(ids);
    ask(approving(ids, t), leftToKip441(t), { option: "approve", groups: ids, reason: form.elements.reason.value });
  });
  document.getElementById("reject").addEventListener("click", () => {
    ask(`Reject all ${plural(data.offered, "plan")}: nothing is published.`, leftToKip441(totals([])),
      { option: "reject", groups: [], reason: form.elements.reason.value });
  });
  document.getElementById("confirm-no").addEventListener("click", () => { dialog.close(); pending = null; });
  document.getElementById("confirm-yes").addEventListener("click", () => {
    dialog.close();
    if (!live) { show("refused", "<p>This file cannot answer: open the page from Airflow.</p>"); return; }
    if (pending) send(pending);
    pending = null;
  });
  draw();
  refresh();
})();
