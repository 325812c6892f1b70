// The foureyes console: a chat pane on the guarded pipeline, each reply's decision trail,
// the recorded traces, and the stored eval runs' reports. Vanilla JS, no dependencies,
// served from this origin only.
//
// Safety: every text that came from a user, a model or the service is put in the page with
// textContent (through h() below, which only ever creates text nodes for strings); no
// markup is ever built from strings. The page's CSP forbids inline script besides.
(() => {
  "use strict";

  const config = JSON.parse(document.getElementById("fe-config").textContent);
  const S = config.strings;
  const KEY_STORE = "foureyes.console.key";
  const CONVERSATION_STORE = "foureyes.console.conversation"; // the open conversation's id
  const CONVERSATIONS_STORE = "foureyes.console.conversations"; // every conversation of the tab
  const TRANSCRIPT_STORE = "foureyes.console.transcript"; // the one conversation of older pages
  const REGIONS = new Set(config.regions || []); // those the service's registry serves
  const GATE_SCHEMA = "foureyes.gate.decision/1";
  const TRACE_ID = /^[0-9a-f]{32}$/;
  const PAGE_SIZE = 50;

  const has = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
  const t = (key) => (has(S, key) ? S[key] : key);
  const label = (family, value) => {
    const key = `${family}.${value}`;
    return has(S, key) ? S[key] : String(value ?? "—");
  };
  const last = (items) => (items.length ? items[items.length - 1] : null);
  const $ = (id) => document.getElementById(id);

  // ---- DOM --------------------------------------------------------------------------

  /** An element; strings among the children become text nodes, never markup. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") el.className = value;
      else if (name === "dataset") Object.assign(el.dataset, value);
      else el.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  function kv(rows) {
    return h(
      "dl",
      { class: "kv" },
      rows.filter(Boolean).map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]),
    );
  }

  function digest(value) {
    if (typeof value !== "string" || !value) return h("span", { class: "muted" }, "—");
    return h("code", { class: "digest", title: value, dataset: { digest: value } },
      `${value.slice(0, 12)}…`);
  }

  function ms(value) {
    if (typeof value !== "number" || !Number.isFinite(value)) return "—";
    return `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;
  }

  function when(iso) {
    const date = new Date(iso);
    if (!iso || Number.isNaN(date.getTime())) return "—";
    const format = new Intl.DateTimeFormat(config.lang, { dateStyle: "medium", timeStyle: "medium" });
    return h("time", { datetime: iso }, format.format(date));
  }

  function outcomeBadge(outcome) {
    const known = outcome === "released" || outcome === "fallback";
    return h("span", { class: `badge badge-${known ? outcome : "other"}`, dataset: { outcome } },
      known ? label("outcome", outcome) : String(outcome ?? "—"));
  }

  /** A closed-set value in the page's language, its raw code beside it in monospace. */
  function coded(family, value, attrs) {
    const known = has(S, `${family}.${value}`);
    return h("span", { ...attrs, title: String(value ?? "") || null },
      known ? h("span", { class: "code-name" }, S[`${family}.${value}`]) : null, known ? " " : null,
      h("code", { class: "code-raw" }, String(value ?? "—")));
  }

  function reasonCode(reason) {
    return coded("reasonname", reason,
      { class: `reason reason-${reason === "approved" ? "ok" : "fallback"}`, dataset: { reason } });
  }

  function levelChip(status, level) {
    // No level is shown as its status: unknown (failed) or unscreened (language not covered).
    const value = status === "unscreened" ? "unscreened" : status === "unknown" || !level ? "unknown" : level;
    return h("span", { class: `level level-${value}`, dataset: { level: value } },
      label("level", value));
  }

  function chips(family, values) {
    if (!values || !values.length) return h("span", { class: "muted" }, t("trail.none"));
    return h("ul", { class: "chips" }, values.map((v) => h("li", { class: "chip" }, label(family, v))));
  }

  /** A card of a trail; ``trail.heading`` is its heading's tag, one below the trail's. */
  function section(trail, title, body, wide) {
    return h("section", { class: wide ? "card wide" : "card" }, h(trail.heading, {}, title), body);
  }

  // ---- the service ------------------------------------------------------------------

  const apiKey = () => sessionStorage.getItem(KEY_STORE);

  /** A request to the service with the page's key and language; throws on no network. */
  async function call(path, { method = "GET", body, accept = "application/json" } = {}) {
    const headers = { Accept: accept, "Accept-Language": config.lang };
    const key = apiKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    try {
      return await fetch(path, {
        method, headers, credentials: "omit", cache: "no-store",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new Error(t("error.network"));
    }
  }

  /** The error a refused request stands for (its JSON error message when it has one). */
  async function refusal(response) {
    const data = await response.json().catch(() => null);
    const error = data && data.error;
    const message = error && error.message ? error.message : `${t("error.http")} (HTTP ${response.status})`;
    if (response.status === 401 || response.status === 403) showKeyForm();
    return new Error(message);
  }

  async function api(path, options) {
    const response = await call(path, options);
    if (!response.ok) throw await refusal(response);
    return response.json().catch(() => null);
  }

  const traceCache = new Map();

  function getTrace(id) {
    if (!traceCache.has(id)) {
      const request = api(`/v1/traces/${encodeURIComponent(id)}`);
      traceCache.set(id, request);
      request.catch(() => traceCache.delete(id));
    }
    return traceCache.get(id);
  }

  // ---- access -----------------------------------------------------------------------

  function showKeyForm() {
    $("key-form").hidden = false;
  }

  async function checkAccess() {
    const status = $("auth-status");
    let body;
    try {
      const response = await fetch("/healthz", { headers: { Accept: "application/json" }, cache: "no-store" });
      body = await response.json();
    } catch {
      status.textContent = t("auth.unreachable");
      return;
    }
    const mode = body && body.auth;
    if (mode === "open_loopback") {
      status.textContent = t("auth.open_loopback");
      $("key-form").hidden = true;
    } else if (mode === "keys") {
      status.textContent = `${t("auth.keys")} ${apiKey() ? t("auth.key_set") : t("auth.key_missing")}`;
      showKeyForm();
    } else if (mode === "closed") {
      status.textContent = t("auth.closed");
    } else if (body && body.status === "unavailable") {
      status.textContent = t("auth.store_down");
    } else {
      status.textContent = t("auth.unreachable");
    }
  }

  function useKey(event) {
    event.preventDefault();
    const input = $("api-key");
    const key = input.value.trim();
    input.value = "";
    if (key) sessionStorage.setItem(KEY_STORE, key);
    traceCache.clear();
    checkAccess();
    if (!$("traces").hidden) loadTraces(true);
    if (!$("reports").hidden) {
      loadReports();
      if (reportShown) openReport(reportShown);
    }
  }

  function forgetKey() {
    sessionStorage.removeItem(KEY_STORE);
    traceCache.clear();
    checkAccess();
  }

  // ---- the decision trail -----------------------------------------------------------

  /** What a trace says about one reply: the summary GET /v1/traces/{id} lifts out of it. */
  function trailOf(trace) {
    const events = trace && Array.isArray(trace.events) ? trace.events : [];
    const summary = (trace && trace.summary) || {};
    const stage = (name) => last(events.filter((e) => e.kind === "risk" && e.stage === name));
    const gate = summary.gate && summary.gate.schema === GATE_SCHEMA ? summary.gate : null;
    return {
      run: (trace && trace.run) || {},
      triage: summary.triage || null,
      stages: { l1: stage("l1") && stage("l1").data, l2: stage("l2") && stage("l2").data },
      gate,
      delivery: summary.delivery || null,
      calls: events.filter((e) => e.kind === "model_call"),
      ends: events.map((e) => e.at),
    };
  }

  function decisionCard(trail, summary) {
    const gate = trail.gate;
    const outcome = gate ? gate.outcome : summary ? summary.decision : trail.run.outcome;
    const reason = gate ? gate.reason : summary ? summary.reason : trail.run.reason;
    const body = [
      h("p", { class: "verdict-line" }, outcomeBadge(outcome), " ", reasonCode(reason)),
      reason ? h("p", { class: "explain" }, label("reason", reason)) : null,
    ];
    // A reply's text is shown above its trail; a trace keeps none, only digests.
    if (!summary) {
      body.push(h("p", { class: "muted" }, t("trail.text_not_kept")));
      const rendered = ((gate && gate.code_rendered) || []).join(", ");
      if (rendered) body.push(h("p", {}, `${t("trail.code_rendered")}: `, h("code", {}, rendered)));
    }
    return section(trail, t("trail.decision"), body);
  }

  function assessment(tier, data, stage) {
    const title = h("span", { class: "tier" }, label("tier", tier));
    if (!data) {
      const failed = stage && stage.reason;
      return h("li", { class: "assessment", dataset: { tier } }, title, " ",
        h("span", { class: "muted" }, failed ? `${t("assess.failed")}: ${label("suppress", failed)}` : t("assess.not_run")));
    }
    const flags = Object.entries(data.context_flags || {}).filter(([, on]) => on).map(([name]) => name);
    return h("li", { class: "assessment", dataset: { tier } }, title, " ",
      levelChip("ok", data.level), " ",
      h("span", {}, `${t("assess.confidence")} ${Math.round((data.confidence || 0) * 100)}%`),
      data.capped ? h("span", { class: "note" }, ` · ${t("assess.capped")} (${t("assess.reported")}: ${label("level", data.reported_level)})`) : null,
      flags.length ? h("span", { class: "note" }, ` · ${t("assess.flags")}: ${flags.map((f) => label("flag", f)).join(", ")}`) : null,
      data.offline ? h("span", { class: "note" }, ` · ${t("assess.offline")}`) : null);
  }

  function policyLine(triage, delivery) {
    const policy = delivery && delivery.policy;
    if (!policy || !policy.floor) return coded("policy", triage.policy, { dataset: { policy: triage.policy } });
    return h("span", { dataset: { policy: policy.applied } }, coded("policy", policy.applied),
      h("span", { class: "note", title: policy.floor }, ` · ${label("floor", policy.floor)}`));
  }

  function alertLine(alert) {
    return h("span", { class: `alert alert-${alert.status}`, dataset: { alert: alert.status } },
      label("alert", alert.status), alert.reason ? [" · ", label("alertblock", alert.reason)] : null);
  }

  function riskCard(summary, trail) {
    const triage = trail.triage;
    const risk = triage || summary || null;
    if (!risk) return section(trail, t("risk.heading"), h("p", { class: "muted" }, t("risk.not_recorded")));
    const l0 = triage && triage.l0;
    const rows = [
      [t("risk.status"), label("status", risk.status)],
      [t("risk.level"), levelChip(risk.status, risk.level)],
      [t("risk.tier"), h("span", { dataset: { tier: risk.tier } }, label("tier", risk.tier))],
      [t("risk.confirmed"), h("span", { class: risk.confirmed ? "confirmed" : "" },
        risk.confirmed ? t("confirmed.yes") : t("confirmed.no"))],
      triage && [t("risk.policy"), policyLine(triage, trail.delivery)],
      trail.delivery && trail.delivery.alert && [t("alert.heading"), alertLine(trail.delivery.alert)],
    ];
    const body = [kv(rows)];
    if (l0) {
      body.push(h("div", { class: "l0" },
        h("p", { class: "label" }, `${label("tier", "L0")} · ${l0.escalate ? t("l0.escalated") : t("l0.not_escalated")} · ${t("l0.score")} ${l0.score}`),
        h("p", { class: "label" }, t("l0.categories")),
        chips("category", l0.categories),
        l0.dampened_by && l0.dampened_by.length
          ? h("p", { class: "note" }, `${t("l0.dampened")}: `, l0.dampened_by.map((d) => h("code", {}, d, " ")))
          : null));
    }
    if (triage) {
      body.push(h("ul", { class: "assessments" },
        assessment("L1", triage.l1, trail.stages.l1), assessment("L2", triage.l2, trail.stages.l2)));
      if (triage.confirmation && triage.confirmation.length) {
        body.push(h("p", { class: "label" }, t("risk.unmet")), chips("check", triage.confirmation));
      }
      if (triage.reasons && triage.reasons.length) {
        body.push(h("p", { class: "label" }, t("risk.reasons")), chips("suppress", triage.reasons));
      }
    }
    return section(trail, t("risk.heading"), body);
  }

  /** A rule broken, with its description; ``byModel`` quotes a note a model wrote
   * (``null`` when the store keeps no such text: privacy settings or retention). */
  function ruleItem(rule, note, byModel) {
    const description = has(config.rules, rule) ? config.rules[rule] : null;
    return h("li", { dataset: { rule } }, h("code", {}, rule),
      description ? h("span", { class: "note" }, ` — ${description}`) : null,
      byModel && note === null ? h("span", { class: "note" }, ` ${t("review.model_text_not_kept")}`) : null,
      note && byModel ? h("span", { class: "model-note" }, ` “${note}”`) : null,
      note && !byModel ? h("span", { class: "finding-note" }, ` (${note})`) : null);
  }

  function attemptItem(attempt) {
    const review = attempt.review;
    const heading = attempt.revision === 0 ? t("review.draft") : `${t("review.revision")} ${attempt.revision}`;
    const parts = [h("p", { class: "attempt-head" }, h("strong", {}, heading), " ",
      digest(attempt.candidate_sha256), " ", reasonCode(attempt.reason))];
    if (attempt.rules_fired && attempt.rules_fired.length) {
      parts.push(h("p", { class: "label" }, t("review.rules_fired")),
        h("ul", { class: "rules fired" }, attempt.rules_fired.map((f) => ruleItem(f.rule, f.note, false))));
    }
    if (review) {
      const verdict = review.verdict || {};
      const matches = verdict.candidate_sha256 === attempt.candidate_sha256;
      parts.push(h("p", {},
        `${t("review.verdict")}: `,
        h("span", { class: `verdict verdict-${verdict.decision}`, dataset: { verdict: verdict.decision } },
          label("verdict", verdict.decision)),
        ` · ${t("review.verdict_names")} `, digest(verdict.candidate_sha256),
        h("span", { class: matches ? "match" : "mismatch", "aria-label": matches ? "=" : "≠" }, matches ? " ✓" : " ✗"),
        h("span", { class: "note" }, ` · ${t("review.route")} ${review.route}${review.offline ? ` (${t("review.offline")})` : ""}`)));
      if (verdict.violations && verdict.violations.length) {
        parts.push(h("p", { class: "label" }, t("review.violations")),
          h("ul", { class: "rules" }, verdict.violations.map((v) => ruleItem(v.rule, v.note, true))));
      }
      if (verdict.missing && verdict.missing.length) {
        parts.push(h("p", { class: "label" }, t("review.missing")),
          h("ul", { class: "missing" }, verdict.missing.map((m) => h("li", {}, m === null ? t("review.model_text_not_kept") : m))));
      }
      if (review.problem) {
        parts.push(h("p", { class: "problem" }, `${t("review.problem")}: `, reasonCode(review.problem.reason),
          review.problem.detail ? ` ${review.problem.detail}` : ""));
      }
    } else {
      parts.push(h("p", { class: "muted" }, t("review.no_review")));
    }
    if (attempt.failure) {
      parts.push(h("p", { class: "problem" }, `${t("review.failure")}: `, reasonCode(attempt.failure),
        attempt.error ? ` ${attempt.error}` : ""));
    }
    return h("li", { class: "attempt" }, parts);
  }

  function reviewCard(summary, trail) {
    const gate = trail.gate;
    const candidate = gate ? gate.candidate_sha256 : summary && summary.candidate_sha256;
    const delivered = gate ? gate.delivered_sha256 : summary && summary.delivered_sha256;
    const rows = [
      [t("review.candidate"), candidate ? digest(candidate) : h("span", { class: "muted" }, t("review.no_candidate"))],
      [t("review.delivered"), h("span", {}, digest(delivered),
        gate ? ` (${gate.delivered_chars} ${t("trail.chars")})` : "")],
    ];
    const body = [kv(rows)];
    if (gate && gate.attempts && gate.attempts.length) {
      body.push(h("ol", { class: "attempts" }, gate.attempts.map(attemptItem)));
    } else if (gate) {
      body.push(h("p", { class: "muted" }, coded("policy", gate.policy)));
    }
    return section(trail, t("review.heading"), body);
  }

  function timingCard(trail) {
    const started = Date.parse(trail.run.started_at);
    const calls = trail.calls.map((event) => {
      const duration = Number(event.data.latency_ms) || 0;
      const end = Date.parse(event.at) - started;
      return { role: event.data.role, stage: event.stage, outcome: event.data.outcome,
        start: Math.max(0, end - duration), duration };
    });
    const ends = trail.ends.map((at) => Date.parse(at) - started).filter(Number.isFinite);
    const timings = trail.delivery && trail.delivery.timings;
    const total = Math.max(1, timings ? timings.total_ms : 0, ...ends,
      ...calls.map((c) => c.start + c.duration));
    const body = [];
    if (timings) {
      body.push(h("p", { class: "note timing-split" },
        [[t("timing.triage"), timings.triage_ms], [t("timing.gate"), timings.gate_ms],
          [t("timing.models"), timings.model_ms], [t("timing.overhead"), timings.overhead_ms]]
          .map(([name, value]) => `${name} ${ms(value)}`).join(" · ")));
    }
    if (!calls.length) {
      body.push(h("p", { class: "muted" }, t("timing.none")));
      return section(trail, t("timing.heading"), body, true);
    }
    const row = (name, start, duration, extra) => {
      const bar = h("span", { class: `wf-bar ${extra.bar}` });
      bar.style.left = `${(100 * start) / total}%`;
      bar.style.width = `${Math.max(0.6, (100 * duration) / total)}%`;
      return h("li", { class: "wf-row" }, h("span", { class: "wf-label", title: extra.stage || null }, name),
        h("span", { class: "wf-track" }, bar), h("span", { class: "wf-ms" }, ms(duration)));
    };
    body.push(h("figure", { class: "waterfall" },
      h("figcaption", {}, t("timing.caption")),
      h("ol", { class: "wf" },
        row(t("timing.total"), 0, total, { bar: "wf-total" }),
        calls.map((c) => row(`${label("role", c.role)} · ${label("stage", c.stage)}${c.outcome === "ok" ? "" : ` (${t("timing.failed")})`}`,
          c.start, c.duration, { bar: `role-${c.role}${c.outcome === "ok" ? "" : " failed"}`, stage: c.stage })))));
    return section(trail, t("timing.heading"), body, true);
  }

  /** The trail's cards: from the reply's summary at once, then from its trace. */
  function renderTrail(container, { summary, trace, heading }) {
    const trail = { ...trailOf(trace), heading };
    // The reply's foureyes object, or the pipeline's record of it: the same fields.
    const block = summary || trail.delivery;
    const cards = [decisionCard(trail, summary), riskCard(block && block.risk, trail),
      reviewCard(block, trail)];
    if (trace) cards.push(timingCard(trail));
    if (trace && !trail.gate) cards.push(h("p", { class: "muted" }, t("trail.no_record")));
    container.replaceChildren(h("div", { class: "cards" }, cards));
  }

  // ---- chat -------------------------------------------------------------------------

  function randomId() {
    const bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
  }

  function parsed(key, fallback) {
    try {
      const value = JSON.parse(sessionStorage.getItem(key) || "null");
      return value === null ? fallback : value;
    } catch (error) {
      return fallback;
    }
  }

  /** A conversation: its id (the request's ``user``), its region ("" for none), its turns. */
  function conversation(id, region, turns) {
    const kept = Array.isArray(turns) ? turns.filter((turn) => turn && typeof turn === "object") : [];
    return { id, region: REGIONS.has(region) ? region : "", turns: kept };
  }

  /** The tab's conversations, and the one open; a region the service no longer serves is dropped. */
  function loadConversations() {
    const stored = parsed(CONVERSATIONS_STORE, []);
    const list = (Array.isArray(stored) ? stored : [])
      .filter((c) => c && typeof c.id === "string" && c.id)
      .map((c) => conversation(c.id, c.region, c.turns));
    const open = sessionStorage.getItem(CONVERSATION_STORE);
    if (!list.length) list.push(conversation(open || randomId(), "", parsed(TRANSCRIPT_STORE, [])));
    sessionStorage.removeItem(TRANSCRIPT_STORE);
    return { list, open: list.some((c) => c.id === open) ? open : last(list).id };
  }

  const loaded = loadConversations();
  const state = {
    conversations: loaded.list,
    open: loaded.open,
    busy: false,
    traceFilters: null,
    traceCursor: null,
  };
  const current = () => state.conversations.find((c) => c.id === state.open);

  function saveChat() {
    sessionStorage.setItem(CONVERSATION_STORE, state.open);
    sessionStorage.setItem(CONVERSATIONS_STORE, JSON.stringify(state.conversations));
  }

  function traceLink(id) {
    if (typeof id !== "string" || !TRACE_ID.test(id)) return null;
    return h("a", { href: `#traces/${id}`, class: "trace-link" }, `${t("trail.open_trace")} ${id.slice(0, 8)}…`);
  }

  async function fillTrail(container, turn) {
    const id = turn.foureyes && turn.foureyes.trace_id;
    renderTrail(container, { summary: turn.foureyes, heading: "h3" });
    if (!id) return;
    try {
      renderTrail(container, { summary: turn.foureyes, trace: await getTrace(id), heading: "h3" });
    } catch (error) {
      container.append(h("p", { class: "problem" }, `${t("trail.unavailable")}: ${error.message}`));
    }
  }

  function renderTurn(turn, index) {
    const user = h("div", { class: "msg user" }, h("p", { class: "who" }, t("chat.you")),
      h("p", { class: "text" }, turn.user));
    if (turn.error) {
      return h("li", { class: "turn", dataset: { turn: index } }, user,
        h("div", { class: "msg error", role: "alert" }, `${t("chat.failed")}: ${turn.error}`));
    }
    const summary = turn.foureyes || {};
    const trail = h("div", { class: "trail-body" });
    const replyId = `reply-${index}`;
    const reply = h("article", { class: `msg reply ${summary.decision || ""}`, "aria-labelledby": replyId },
      h("p", { class: "who", id: replyId }, t("chat.reply"), " ", outcomeBadge(summary.decision), " ",
        reasonCode(summary.reason), " ", traceLink(summary.trace_id)),
      h("p", { class: "text reply-text" }, turn.reply),
      // Collapsed until asked for: a conversation reads as its replies, each trail a click away.
      h("details", { class: "trail" }, h("summary", {}, t("trail.heading")), trail));
    fillTrail(trail, turn);
    return h("li", { class: "turn", dataset: { turn: index, reason: summary.reason } }, user, reply);
  }

  /** The conversation menu (each with its region) and the open conversation's region. */
  function renderMenus() {
    const open = current();
    const menu = $("conversation-select");
    menu.replaceChildren(...state.conversations.map((c) =>
      h("option", { value: c.id }, c.region ? `${c.id} · ${c.region}` : c.id)));
    menu.value = open.id;
    $("region-select").value = open.region;
  }

  function renderChat() {
    const open = current();
    renderMenus();
    $("transcript").replaceChildren(...open.turns.map(renderTurn));
    $("chat-empty").hidden = open.turns.length > 0;
  }

  async function send(event) {
    event.preventDefault();
    const input = $("message");
    const text = input.value.trim();
    if (!text || state.busy) return;
    state.busy = true;
    $("send").disabled = true;
    $("chat-status").textContent = t("chat.sending");
    // The turn belongs to the conversation it was sent in, even if another is opened meanwhile.
    const chat = current();
    const messages = chat.turns.filter((turn) => !turn.error).flatMap((turn) => [
      { role: "user", content: turn.user }, { role: "assistant", content: turn.reply }]);
    messages.push({ role: "user", content: text });
    const turn = { user: text, reply: null, foureyes: null, error: null };
    const body = { model: config.model, messages, user: chat.id };
    if (chat.region) body.foureyes = { region: chat.region };
    try {
      const data = await api("/v1/chat/completions", { method: "POST", body });
      const choice = data.choices && data.choices[0];
      turn.reply = (choice && choice.message && choice.message.content) || "";
      turn.foureyes = data.foureyes || null;
      input.value = "";
    } catch (error) {
      turn.error = error.message;
    }
    chat.turns.push(turn);
    saveChat();
    if (current() === chat) {
      $("transcript").append(renderTurn(turn, chat.turns.length - 1));
      $("chat-empty").hidden = true;
    }
    $("chat-status").textContent = turn.error
      ? `${t("chat.failed")}: ${turn.error}`
      : `${label("outcome", turn.foureyes && turn.foureyes.decision)} · ${turn.foureyes && turn.foureyes.reason}`;
    state.busy = false;
    $("send").disabled = false;
    input.focus();
  }

  function newConversation() {
    const chat = conversation(randomId(), "", []);
    state.conversations.push(chat);
    state.open = chat.id;
    saveChat();
    renderChat();
    $("message").focus();
  }

  function openConversation(event) {
    if (!state.conversations.some((c) => c.id === event.target.value)) return;
    state.open = event.target.value;
    saveChat();
    renderChat();
  }

  function chooseRegion(event) {
    const region = event.target.value;
    current().region = REGIONS.has(region) ? region : "";
    saveChat();
    renderMenus();
  }

  // ---- traces -----------------------------------------------------------------------

  /** Midnight starting ``date`` (YYYY-MM-DD) in the browser's time zone, ``days`` later. */
  function midnight(date, days) {
    const moment = new Date(`${date}T00:00:00`);
    moment.setDate(moment.getDate() + days);
    return moment.toISOString();
  }

  function filters() {
    const form = new FormData($("trace-filters"));
    const value = (name) => String(form.get(name) || "").trim();
    const params = new URLSearchParams();
    if (value("purpose")) params.set("purpose", value("purpose"));
    if (value("reason")) params.set("reason", value("reason"));
    if (value("risk_level")) params.set("risk_level", value("risk_level"));
    // Whole days: from the first day's midnight to the midnight after the last day.
    if (value("since")) params.set("since", midnight(value("since"), 0));
    if (value("until")) params.set("until", midnight(value("until"), 1));
    return params;
  }

  function traceRow(item) {
    const risk = item.risk || {};
    const id = item.trace_id;
    return h("tr", { dataset: { trace: id, reason: item.reason } },
      h("td", {}, when(item.started_at)),
      h("td", {}, outcomeBadge(item.outcome)),
      h("td", {}, reasonCode(item.reason)),
      h("td", {}, item.risk ? [levelChip(risk.status, risk.level), ` ${risk.tier || ""}`] : "—"),
      h("td", {}, TRACE_ID.test(id)
        ? h("a", { href: `#traces/${id}`, class: "trace-link", "aria-label": `${t("trail.open_trace")} ${id}` },
          h("code", {}, `${id.slice(0, 12)}…`))
        : id));
  }

  /**
   * A counter of loads into one view: each call starts a load and returns a check that
   * stays true only while no later load has started, so a slow answer to an earlier
   * request (a reset's list, a trace opened before another) never overwrites a later one.
   */
  function superseding() {
    let latest = 0;
    return () => {
      const mine = ++latest;
      return () => mine === latest;
    };
  }

  const traceListLoad = superseding();
  const traceDetailLoad = superseding();

  async function loadTraces(reset) {
    const status = $("traces-status");
    const table = $("trace-table");
    const current = traceListLoad();
    if (reset) {
      state.traceFilters = filters();
      state.traceCursor = null;
      $("traces-more").hidden = true; // no "more" of a list that is being replaced
    }
    const params = new URLSearchParams(state.traceFilters);
    params.set("limit", String(PAGE_SIZE));
    if (state.traceCursor) params.set("before", state.traceCursor);
    status.textContent = t("trail.loading");
    table.setAttribute("aria-busy", "true");
    try {
      const data = await api(`/v1/traces?${params}`);
      if (!current()) return;
      const rows = (Array.isArray(data.data) ? data.data : []).map(traceRow);
      if (reset) table.tBodies[0].replaceChildren(...rows);
      else table.tBodies[0].append(...rows);
      state.traceCursor = data.next_before || null;
      $("traces-more").hidden = !state.traceCursor;
      const shown = table.tBodies[0].rows.length;
      status.textContent = shown ? `${shown} ${t("traces.count")}` : t("traces.empty");
    } catch (error) {
      if (current()) status.textContent = `${t("trail.unavailable")}: ${error.message}`;
    } finally {
      if (current()) table.removeAttribute("aria-busy");
    }
  }

  function runFacts(run) {
    return kv([
      [t("detail.kind"), coded("kind", run.kind)],
      [t("detail.started"), when(run.started_at)],
      [t("detail.finished"), when(run.finished_at)],
      run.conversation_id && [t("detail.conversation"), h("code", {}, run.conversation_id)],
      [t("detail.fingerprint"), digest(run.input_fingerprint)],
      run.input_text && [t("detail.input"), h("blockquote", { class: "delivered" }, run.input_text)],
    ]);
  }

  async function openTrace(id) {
    const status = $("detail-status");
    const body = $("detail-body");
    $("detail-id").textContent = id;
    body.replaceChildren();
    // Shown above the list and scrolled to, so an opened trace is never pages below.
    $("trace-detail").hidden = false;
    $("trace-detail").scrollIntoView({ block: "start" });
    status.textContent = t("trail.loading");
    const current = traceDetailLoad();
    let trace;
    try {
      trace = await getTrace(id);
    } catch (error) {
      if (current()) status.textContent = `${t("trail.unavailable")}: ${error.message}`;
      return;
    }
    if (!current()) return;
    status.textContent = "";
    const trail = h("div", { class: "trail-body" });
    renderTrail(trail, { trace, heading: "h4" });
    body.replaceChildren(runFacts(trace.run || {}), trail);
    $("trace-detail").focus();
    $("trace-detail").scrollIntoView({ block: "start" });
  }

  // ---- eval reports -----------------------------------------------------------------

  const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
  const reportPath = (id, suffix = "") =>
    `/v1/evals/${encodeURIComponent(id)}/report${suffix}?lang=${encodeURIComponent(config.lang)}`;
  let reportShown = null;

  function reportRow(run) {
    const id = String(run.run_id);
    return h("tr", { dataset: { run: id } },
      h("td", {}, when(run.created_at)),
      h("td", {}, String(run.suite ?? "—")),
      h("td", {}, String(run.kind ?? "—")),
      h("td", {}, Array.isArray(run.arms) ? run.arms.map(String).join(", ") : "—"),
      h("td", {}, String(run.results ?? 0)),
      h("td", {}, h("a", { href: `#reports/${encodeURIComponent(id)}`, class: "report-link",
        "aria-label": `${t("reports.open")} ${id}` }, h("code", {}, id))));
  }

  async function loadReports() {
    const status = $("reports-status");
    const table = $("report-table");
    status.textContent = t("trail.loading");
    table.setAttribute("aria-busy", "true");
    try {
      const data = await api("/v1/evals");
      const rows = (Array.isArray(data.data) ? data.data : []).map(reportRow);
      table.tBodies[0].replaceChildren(...rows);
      status.textContent = rows.length ? `${rows.length} ${t("reports.count")}` : t("reports.empty");
    } catch (error) {
      status.textContent = `${t("reports.unavailable")}: ${error.message}`;
    } finally {
      table.removeAttribute("aria-busy");
    }
  }

  /** A table of the report view (heading, header, rows of text), or nothing. */
  function reportTable(table) {
    if (!table || !Array.isArray(table.header) || !Array.isArray(table.rows)) return [];
    const heading = table.heading ? [h("h4", {}, table.heading)] : [];
    return [
      ...heading,
      h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, table.header.map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, table.rows.map((row) => h("tr", {}, row.map((c) => h("td", {}, c))))))),
    ];
  }

  /** Sentences of the report view, each a paragraph of text (never markup). */
  function reportNotes(notes, cls = "note") {
    return (Array.isArray(notes) ? notes : [])
      .filter((n) => typeof n === "string" && n)
      .map((n) => h("p", { class: cls }, n));
  }

  /**
   * A group of plots and why any is left out; nothing when it has neither. Only base64
   * text ever becomes an image's data: URL, and an SVG (drawn by the server where
   * matplotlib is missing) is shown as an image too, so nothing in it can run.
   */
  function reportPlots(group) {
    if (!group || !Array.isArray(group.items)) return [];
    const source = (p) => {
      if (typeof p.png_base64 === "string" && BASE64.test(p.png_base64)) {
        return `data:image/png;base64,${p.png_base64}`;
      }
      if (typeof p.svg_base64 === "string" && BASE64.test(p.svg_base64)) {
        return `data:image/svg+xml;base64,${p.svg_base64}`;
      }
      return null;
    };
    const images = group.items
      .filter((p) => p && source(p))
      .map((p) => h("img", { class: "plot", alt: String(p.alt ?? ""), src: source(p) }));
    const notes = reportNotes([group.note, ...(Array.isArray(group.notes) ? group.notes : [])]);
    if (!images.length && !notes.length) return [];
    return [h("h4", {}, group.heading), ...notes, h("div", { class: "plots" }, images)];
  }

  async function openReport(id) {
    const status = $("report-status");
    const body = $("report-body");
    reportShown = id;
    $("report-id").textContent = id;
    $("report-downloads").hidden = true;
    body.replaceChildren();
    status.textContent = t("reports.drawing");
    let view;
    try {
      view = await api(reportPath(id));
    } catch (error) {
      if (reportShown === id) status.textContent = `${t("reports.unavailable")}: ${error.message}`;
      return;
    }
    if (reportShown !== id) return; // another run was opened meanwhile
    status.textContent = "";
    body.replaceChildren(
      h("p", { class: "report-title" }, h("strong", {}, view.title)),
      ...reportTable(view.facts),
      ...(view.power ? [h("p", { class: "report-power" }, view.power)] : []),
      ...reportTable(view.arms),
      ...reportNotes(view.caveats, "report-caveat explain"),
      ...reportTable(view.failure_reasons),
      ...reportNotes([view.failure_note]),
      ...reportTable(view.contrasts),
      ...reportTable(view.review),
      ...reportPlots(view.plots),
      ...reportPlots(view.confusions),
      ...reportTable(view.agreement),
    );
    $("report-downloads").hidden = false;
    $("report-detail").focus();
  }

  /** Download the shown report as a file (the key travels in a header, never a URL). */
  async function downloadReport(suffix, accept) {
    const id = reportShown;
    if (!id) return;
    const status = $("report-status");
    try {
      const response = await call(reportPath(id, suffix), { accept });
      if (!response.ok) throw await refusal(response);
      const url = URL.createObjectURL(await response.blob());
      const link = h("a", { href: url, download: `${id}${suffix}`, hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      status.textContent = `${t("reports.downloaded")}: ${id}${suffix}`;
    } catch (error) {
      status.textContent = `${t("reports.unavailable")}: ${error.message}`;
    }
  }

  // ---- views ------------------------------------------------------------------------

  let tracesLoaded = false;
  let reportsLoaded = false;

  /** The view and the item of the location's hash (``#traces/<id>``, ``#reports/<id>``). */
  function hashRoute() {
    const hash = location.hash.replace(/^#/, "");
    const slash = hash.indexOf("/");
    const view = slash < 0 ? hash : hash.slice(0, slash);
    let item = "";
    try {
      item = slash < 0 ? "" : decodeURIComponent(hash.slice(slash + 1));
    } catch {
      item = "";
    }
    return { view, item };
  }

  function route(focus) {
    const { view, item } = hashRoute();
    const name = view === "traces" || view === "reports" ? view : "chat";
    for (const el of document.querySelectorAll("main > .view")) el.hidden = el.id !== name;
    for (const link of document.querySelectorAll("nav a[data-view]")) {
      if (link.dataset.view === name) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    if (name === "traces") {
      if (!tracesLoaded) {
        tracesLoaded = true;
        loadTraces(true);
      }
      if (item && TRACE_ID.test(item)) {
        openTrace(item);
        return;
      }
    }
    if (name === "reports") {
      if (!reportsLoaded) {
        reportsLoaded = true;
        loadReports();
      }
      if (item) {
        openReport(item);
        return;
      }
    }
    if (focus) $(name).focus();
  }

  function start() {
    $("lang-apply").hidden = true;
    $("lang-select").addEventListener("change", (event) => {
      const url = new URL(location.href);
      url.searchParams.set("lang", event.target.value);
      location.assign(url.toString());
    });
    $("key-form").addEventListener("submit", useKey);
    $("key-forget").addEventListener("click", forgetKey);
    $("chat-form").addEventListener("submit", send);
    $("message").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("chat-form").requestSubmit();
    });
    $("new-conversation").addEventListener("click", newConversation);
    $("conversation-select").addEventListener("change", openConversation);
    $("region-select").addEventListener("change", chooseRegion);
    $("trace-filters").addEventListener("submit", (event) => {
      event.preventDefault();
      loadTraces(true);
    });
    $("trace-filters").addEventListener("reset", () => setTimeout(() => loadTraces(true), 0));
    $("traces-more").addEventListener("click", () => loadTraces(false));
    $("report-html").addEventListener("click", () => downloadReport(".html", "text/html"));
    $("report-md").addEventListener("click", () => downloadReport(".md", "text/markdown"));
    window.addEventListener("hashchange", () => route(true));
    saveChat();
    renderChat();
    checkAccess();
    route(false);
  }

  start();
})();
