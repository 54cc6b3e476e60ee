#!/usr/bin/env node
// A2A agent adapter for Node.js 20+ (no npm packages needed).
//
// Downloaded from the platform at GET /api/a2a/adapter.js, with the platform's URL filled in.
// It registers your agent, serves A2A 1.0 over HTTP+JSON (POST /message:send,
// GET /tasks/{id}, POST /tasks/{id}:cancel, GET /health, the agent card) and calls YOUR
// async handler for each message. Where a WebSocket is available (Node 22+, or Node 20
// with --experimental-websocket) it also connects to the platform's gateway, so tasks
// still reach it when its HTTP side is down.
//
// Try it:       SKILL_ID=ce-certification-review-v1 node adapter.js
// Use it:       const { startAgent } = require("./adapter.js");
//               startAgent({ skillId: "my-skill", handler: async ({ input, answers }) => {
//                 if (!answers.length) return { question: "Which market?" };
//                 return { output: { verdict: "pass", market: answers[0] } };
//               } });
//
// A handler gets { input, answers, skill, taskId, contextId, signal } and returns one of
//   { output: {...} }    completed; `output` must fit the skill's output_schema
//   { question: "..." }  input required; the person's answer arrives in `answers` next call
//   { fail: "reason" }   failed          { reject: "reason" }  rejected
// (plus an optional `text` for the status message). Throwing fails the task.
//
// Environment: PLATFORM_URL, AGENT_ID, AGENT_NAME, SKILL_ID, DOMAIN, SUBDOMAIN, A2A_HOST,
// A2A_PORT (3001), A2A_PUBLIC_URL (the URL registered; "none": WebSocket only), A2A_HTTP
// ("off": no HTTP side), AGENT_KEY_FILE (.agent-keys/<AGENT_ID>.json), REGISTRATION_TOKEN,
// WS_PING_INTERVAL (20 s), RECONNECT_MAX (30 s), WS_CONNECT_TIMEOUT (10 s).
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const DEFAULT_PLATFORM_URL = "__PLATFORM_URL__";
const TERMINAL = new Set([
  "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
]);
const INTERRUPTED = new Set(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]);

class ConfigError extends Error {}

function log(...args) {
  console.error(new Date().toISOString(), "adapter:", ...args);
}

function configFromEnv(env, overrides = {}) {
  const pick = (key, name, fallback) => overrides[key] ?? (env[name] || fallback);
  const agentId = pick("agentId", "AGENT_ID", "js-agent");
  const host = pick("host", "A2A_HOST", "127.0.0.1");
  const port = Number(pick("port", "A2A_PORT", 3001));
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new ConfigError(`A2A_PORT must be a TCP port (1-65535), got ${JSON.stringify(env.A2A_PORT)}`);
  }
  const platformUrl = String(pick("platformUrl", "PLATFORM_URL", DEFAULT_PLATFORM_URL)).replace(/\/+$/, "");
  if (!/^https?:\/\//.test(platformUrl)) {
    throw new ConfigError(`PLATFORM_URL must be an http(s) URL, got ${JSON.stringify(platformUrl)}`);
  }
  const publicUrl = String(pick("publicUrl", "A2A_PUBLIC_URL", `http://${host}:${port}`));
  const httpSetting = pick("http", "A2A_HTTP", "on");
  return {
    platformUrl,
    agentId,
    agentName: pick("agentName", "AGENT_NAME", "JavaScript agent"),
    skillId: pick("skillId", "SKILL_ID", "ce-certification-review-v1"),
    domain: pick("domain", "DOMAIN", ""),
    subdomain: pick("subdomain", "SUBDOMAIN", ""),
    host,
    port,
    publicUrl: publicUrl.toLowerCase() === "none" ? null : publicUrl.replace(/\/+$/, ""),
    // An option is a boolean (`http: false`), the variable a word: String(false) is not "off".
    http: ![false, "off"].includes(typeof httpSetting === "string" ? httpSetting.toLowerCase() : httpSetting),
    keyFile: pick("keyFile", "AGENT_KEY_FILE", path.join(".agent-keys", `${agentId}.json`)),
    registrationToken: pick("registrationToken", "REGISTRATION_TOKEN", ""),
    pingInterval: Number(pick("pingInterval", "WS_PING_INTERVAL", 20)) * 1000,
    reconnectMax: Number(pick("reconnectMax", "RECONNECT_MAX", 30)) * 1000,
    connectTimeout: Number(pick("connectTimeout", "WS_CONNECT_TIMEOUT", 10)) * 1000,
  };
}

// ---------------------------------------------------------------------------------------
// The platform: skills and registration
// ---------------------------------------------------------------------------------------

async function platformFetch(config, method, urlPath, { body, headers = {} } = {}) {
  try {
    return await fetch(config.platformUrl + urlPath, {
      method,
      headers: { "Content-Type": "application/json", ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10000),
    });
  } catch (err) {
    const cause = (err.cause && (err.cause.code || err.cause.message)) || err.message;
    throw new ConfigError(
      `cannot reach the platform at ${config.platformUrl} (${cause}); is it running? Check PLATFORM_URL`);
  }
}

async function fetchSkill(config) {
  const response = await platformFetch(config, "GET", "/api/a2a/skills");
  const skills = await response.json().catch(() => null);
  if (!response.ok || !Array.isArray(skills)) {
    throw new ConfigError(`${config.platformUrl}/api/a2a/skills answered ${response.status} without a skill list`);
  }
  const skill = skills.find((s) => s.id === config.skillId);
  if (!skill) {
    const known = skills.map((s) => s.id).sort().join(", ") || "none";
    throw new ConfigError(`skill '${config.skillId}' is not on the platform (known: ${known}); set SKILL_ID`);
  }
  return skill;
}

function readKey(config) {
  try {
    const saved = JSON.parse(fs.readFileSync(config.keyFile, "utf8"));
    return saved.agentId === config.agentId && saved.platformUrl === config.platformUrl ? saved.apiKey : null;
  } catch {
    return null;
  }
}

function saveKey(config, apiKey) {
  fs.mkdirSync(path.dirname(config.keyFile), { recursive: true });
  const record = { agentId: config.agentId, platformUrl: config.platformUrl, apiKey };
  fs.writeFileSync(config.keyFile, JSON.stringify(record), { mode: 0o600 }); // a secret
}

async function register(config, skill) {
  const payload = {
    agentId: config.agentId,
    name: config.agentName,
    description: `Node.js agent for ${skill.id}`,
    skillIds: [skill.id],
    domain: config.domain || skill.domain || "",
    subdomain: config.subdomain || skill.subdomain || "",
    version: "1.0.0",
    metadata: { implementation: "adapter.js" },
  };
  if (config.publicUrl) payload.a2aEndpoint = config.publicUrl;
  const attempt = (key) => {
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    if (config.registrationToken) headers["X-Registration-Token"] = config.registrationToken;
    return platformFetch(config, "POST", "/api/agent-profiles/register", { body: payload, headers });
  };
  const saved = readKey(config);
  let response = await attempt(saved);
  if (saved && response.status === 401) {
    log(`the saved key in ${config.keyFile} was refused; registering anew`);
    response = await attempt(null);
  }
  const body = await response.json().catch(() => ({}));
  if (response.status === 409) {
    throw new ConfigError(
      `agent '${config.agentId}' is already registered and ${config.keyFile} holds no key for it: ` +
      "restore that file or choose another AGENT_ID");
  }
  if (response.status !== 200 && response.status !== 201) {
    const message = (body.error && body.error.message) || response.statusText;
    throw new ConfigError(`registration refused (${response.status}): ${message}`);
  }
  if (body.apiKey) saveKey(config, body.apiKey);
  log(`${response.status === 201 ? "registered" : "re-registered"} as ${config.agentId} (key in ${config.keyFile})`);
  return body.apiKey || saved;
}

// ---------------------------------------------------------------------------------------
// Tasks: one store and one runner for HTTP and the WebSocket
// ---------------------------------------------------------------------------------------

const newId = () => crypto.randomUUID();
const now = () => new Date().toISOString();

// Parts that are not objects are skipped: the HTTP side refuses them, the WebSocket side
// gets what the platform checked.
const partsOf = (message) => ((message && Array.isArray(message.parts) && message.parts) || [])
  .filter((p) => p && typeof p === "object");

function inputOf(message) {
  const parts = partsOf(message);
  const data = parts.find((p) => p.data && typeof p.data === "object" && !Array.isArray(p.data));
  if (data) return data.data;
  const text = parts.filter((p) => typeof p.text === "string").map((p) => p.text).join("\n");
  try {
    const value = JSON.parse(text);
    if (value && typeof value === "object" && !Array.isArray(value)) return value;
  } catch { /* not JSON: plain text */ }
  return text ? { text } : {};
}

function answerOf(message) {
  const parts = partsOf(message);
  const texts = parts.filter((p) => typeof p.text === "string").map((p) => p.text);
  if (texts.length) return texts.join("\n");
  const data = parts.find((p) => "data" in p);
  return data ? JSON.stringify(data.data) : "";
}

// Why `value` cannot be sent as JSON (a BigInt, a cycle, a function), or "" when it can.
function notJson(value) {
  try {
    const text = JSON.stringify(value);
    return typeof text === "string" ? "" : `a ${typeof value} has no JSON form`;
  } catch (err) {
    return err.message;
  }
}

class TaskStore {
  constructor(skill, handler, onUpdate) {
    this.skill = skill;
    this.handler = handler;
    this.onUpdate = onUpdate; // (entry, update) => void, for the WebSocket side
    this.tasks = new Map(); // task id -> entry
    this.byMessage = new Map(); // messageId -> task id (a message sent twice runs once)
  }

  // A new task from a first message; `taskId` is the platform's id on the WebSocket side.
  start(message, { taskId, contextId, via }) {
    const id = taskId || newId();
    const entry = {
      via,
      input: inputOf(message),
      answers: [],
      messageIds: new Set([message.messageId]),
      controller: null,
      task: {
        id,
        contextId: contextId || message.contextId || newId(),
        status: { state: "TASK_STATE_SUBMITTED", timestamp: now() },
        artifacts: [],
        history: [{ ...message, taskId: id }],
      },
    };
    entry.task.history[0].contextId = entry.task.contextId;
    this.tasks.set(id, entry);
    if (message.messageId) this.byMessage.set(message.messageId, id);
    const skillId = (message.metadata && message.metadata.skillId) || this.skill.id;
    if (skillId !== this.skill.id) {
      this.setStatus(entry, "TASK_STATE_REJECTED", `This agent offers ${this.skill.id}, not ${skillId}.`);
    } else {
      entry.done = this.runTurn(entry);
    }
    return entry;
  }

  // A follow-up (the answer to our question) on an existing task.
  reply(entry, message) {
    if (message.messageId && entry.messageIds.has(message.messageId)) return entry; // re-sent
    if (TERMINAL.has(entry.task.status.state)) return entry; // too late: nothing to answer
    entry.messageIds.add(message.messageId);
    entry.task.history.push(message);
    entry.answers.push(answerOf(message));
    entry.done = this.runTurn(entry);
    return entry;
  }

  cancel(entry) {
    if (TERMINAL.has(entry.task.status.state)) return false;
    if (entry.controller) entry.controller.abort();
    this.setStatus(entry, "TASK_STATE_CANCELED", "Canceled.");
    return true;
  }

  async runTurn(entry) {
    const controller = new AbortController();
    entry.controller = controller;
    this.setStatus(entry, "TASK_STATE_WORKING", "Working on it.");
    let result;
    try {
      result = (await this.handler({
        input: entry.input,
        answers: [...entry.answers],
        skill: this.skill,
        taskId: entry.task.id,
        contextId: entry.task.contextId,
        signal: controller.signal,
      })) || {};
    } catch (err) {
      result = { fail: err && err.message ? err.message : String(err) };
    }
    if (controller.signal.aborted || TERMINAL.has(entry.task.status.state)) return; // canceled
    if (result.question !== undefined) {
      // Both: the text alone would lose the question the person has to answer.
      const question = String(result.question);
      this.setStatus(entry, "TASK_STATE_INPUT_REQUIRED", result.text ? [String(result.text), question] : question);
    } else if (result.reject !== undefined) {
      this.setStatus(entry, "TASK_STATE_REJECTED", result.text || String(result.reject));
    } else if (result.fail !== undefined || result.output === undefined) {
      this.setStatus(entry, "TASK_STATE_FAILED", result.text || String(result.fail ?? "the handler returned no output"));
    } else if (notJson(result.output)) {
      // Kept, it would break every answer that shows the task (JSON.stringify throws).
      this.setStatus(entry, "TASK_STATE_FAILED", `handler output is not JSON: ${notJson(result.output)}`);
    } else {
      const artifact = { artifactId: newId(), name: "result", parts: [{ data: result.output }] };
      entry.task.artifacts = [artifact];
      this.setStatus(entry, "TASK_STATE_COMPLETED", result.text || "Done.", [artifact]);
    }
  }

  // `text`: one string, or several (one part each).
  setStatus(entry, state, text, artifacts) {
    const message = {
      messageId: newId(), role: "ROLE_AGENT", taskId: entry.task.id, contextId: entry.task.contextId,
      parts: (Array.isArray(text) ? text : [text]).map((t) => ({ text: t })),
    };
    entry.task.status = { state, message, timestamp: now() };
    if (state !== "TASK_STATE_WORKING") entry.task.history.push(message);
    this.onUpdate(entry, { status: entry.task.status, artifacts });
  }
}

// ---------------------------------------------------------------------------------------
// The HTTP side: A2A 1.0 HTTP+JSON with node:http
// ---------------------------------------------------------------------------------------

const A2A_ERRORS = {
  TASK_NOT_FOUND: [404, "NOT_FOUND"],
  TASK_NOT_CANCELABLE: [409, "FAILED_PRECONDITION"],
  INVALID_PARAMS: [400, "INVALID_ARGUMENT"],
  UNSUPPORTED_OPERATION: [400, "UNIMPLEMENTED"],
  NOT_FOUND: [404, "NOT_FOUND"],
  VERSION_NOT_SUPPORTED: [400, "INVALID_ARGUMENT"],
  PAYLOAD_TOO_LARGE: [413, "INVALID_ARGUMENT"],
  INTERNAL: [500, "INTERNAL"],
};

function sendJson(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res, reason, message, headers) {
  const [code, status] = A2A_ERRORS[reason];
  const detail = { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "a2a-protocol.org" };
  sendJson(res, code, { error: { code, status, message, details: [detail] } }, headers);
}

class BodyTooLarge extends Error {}

// The body as text; past `limit` bytes a BodyTooLarge, once the client has sent it all (a
// client still writing when the socket closes sees a reset, not the 413). A body past
// `drainMax` is not waited for: the connection is cut.
function readBody(req, limit = 1_000_000, drainMax = 20_000_000) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (chunk) => {
      size += chunk.length;
      if (size > drainMax) req.destroy();
      else if (size <= limit) chunks.push(chunk);
    });
    req.on("end", () => (size > limit
      ? reject(new BodyTooLarge(`The body is over ${limit} bytes`))
      : resolve(Buffer.concat(chunks).toString("utf8"))));
    req.on("error", reject);
  });
}

// A2A-Version: absent or empty (served as this agent's only version) or any 1.x.
function versionSupported(req, url) {
  const version = String(req.headers["a2a-version"] ?? url.searchParams.get("A2A-Version") ?? "").trim();
  return version === "" || /^1(\.\d{1,9})?$/.test(version);
}

// Wait until the task leaves SUBMITTED/WORKING (a blocking message:send), or `ms` passes.
async function settled(entry, ms = 60000) {
  const deadline = Date.now() + ms;
  while (!TERMINAL.has(entry.task.status.state) && !INTERRUPTED.has(entry.task.status.state)) {
    if (Date.now() > deadline) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

function makeHttpHandler(agent) {
  return async (req, res) => {
    try {
      const url = new URL(req.url, "http://agent");
      const match = url.pathname.match(/^\/tasks\/([^/:]+)(:cancel)?$/);
      if (!agent.store) { // still registering
        return sendJson(res, 503, { error: { code: 503, status: "UNAVAILABLE", message: "starting" } });
      }
      if (req.method === "GET" && url.pathname === "/health") {
        return sendJson(res, 200, { status: "ok", agentId: agent.config.agentId, skillId: agent.skill.id });
      }
      if (req.method === "GET" && url.pathname === "/.well-known/agent-card.json") {
        return sendJson(res, 200, agent.card());
      }
      const a2aRoute = url.pathname === "/message:send" || match;
      if (a2aRoute && !versionSupported(req, url)) {
        return sendError(res, "VERSION_NOT_SUPPORTED", "This agent speaks A2A 1.x (send A2A-Version: 1.0)");
      }
      if (req.method === "POST" && url.pathname === "/message:send") {
        return await onMessageSend(agent, req, res);
      }
      if (match && req.method === "GET" && !match[2]) {
        const entry = agent.store.tasks.get(decodeURIComponent(match[1]));
        return entry ? sendJson(res, 200, entry.task) : sendError(res, "TASK_NOT_FOUND", "Task not found");
      }
      if (match && req.method === "POST" && match[2]) {
        const entry = agent.store.tasks.get(decodeURIComponent(match[1]));
        if (!entry) return sendError(res, "TASK_NOT_FOUND", "Task not found");
        if (!agent.store.cancel(entry)) return sendError(res, "TASK_NOT_CANCELABLE", "Task is not cancelable");
        return sendJson(res, 200, entry.task);
      }
      return sendError(res, "NOT_FOUND", `No route for ${req.method} ${url.pathname}`);
    } catch (err) {
      log("request failed:", err);
      if (!res.headersSent) sendError(res, "INTERNAL", "internal error");
    }
  };
}

async function onMessageSend(agent, req, res) {
  let request;
  try {
    request = JSON.parse(await readBody(req));
  } catch (err) {
    if (err instanceof BodyTooLarge) return sendError(res, "PAYLOAD_TOO_LARGE", err.message, { Connection: "close" });
    return sendError(res, "INVALID_PARAMS", "The body must be a JSON SendMessageRequest");
  }
  const message = request && request.message;
  if (!message || typeof message !== "object" || !Array.isArray(message.parts) || !message.parts.length) {
    return sendError(res, "INVALID_PARAMS", "message with parts is required");
  }
  const bad = message.parts.findIndex((p) => !p || typeof p !== "object" || Array.isArray(p));
  if (bad >= 0) return sendError(res, "INVALID_PARAMS", `message.parts[${bad}] must be an object (a Part)`);
  const store = agent.store;
  let entry;
  if (message.taskId) { // a follow-up on one of our tasks
    entry = store.tasks.get(message.taskId);
    if (!entry) return sendError(res, "TASK_NOT_FOUND", `Task ${message.taskId} not found`);
    // The same message again (a retry of a send whose reply was lost) gets the task, even
    // after the answer finished it.
    const resent = message.messageId && entry.messageIds.has(message.messageId);
    if (!resent && TERMINAL.has(entry.task.status.state)) {
      return sendError(res, "UNSUPPORTED_OPERATION", `Task ${message.taskId} is in a terminal state`);
    }
    store.reply(entry, message);
  } else if (message.messageId && store.byMessage.has(message.messageId)) {
    entry = store.tasks.get(store.byMessage.get(message.messageId)); // sent twice: same task
  } else {
    entry = store.start(message, { via: "a2a" });
  }
  if (!(request.configuration && request.configuration.returnImmediately)) await settled(entry);
  return sendJson(res, 200, { task: entry.task });
}

// ---------------------------------------------------------------------------------------
// The WebSocket side: the platform's agent gateway (when this Node.js has a WebSocket)
// ---------------------------------------------------------------------------------------

class Gateway {
  constructor(agent) {
    this.agent = agent;
    this.ws = null;
    this.outbox = [];
    this.stopped = false;
    this.delay = 500;
  }

  start() {
    if (typeof globalThis.WebSocket !== "function") {
      log("no WebSocket in this Node.js: gateway off (use Node 22+, or node --experimental-websocket)");
      return;
    }
    this.connect();
  }

  connect() {
    if (this.stopped) return;
    const url = this.agent.config.platformUrl.replace(/^http/, "ws") + "/ws/agent-gateway/";
    const ws = new WebSocket(url);
    this.ws = ws;
    // Node 20's WebSocket fires "error" but no "close" when the connection is refused, so
    // both schedule the next attempt, once (`ended`). A socket stuck connecting (a silent
    // firewall) is given up after connectTimeout.
    let ended = false;
    const retry = (why) => {
      if (ended) return;
      ended = true;
      clearTimeout(connectTimer);
      clearInterval(this.pinger);
      this.connected = false;
      if (this.ws === ws) this.ws = null;
      try { ws.close(); } catch { /* already closing */ }
      if (this.stopped) return;
      // Only a connection that lasted resets the backoff: a refusal (4401/4403) backs off.
      if (this.openedAt && Date.now() - this.openedAt > 10000) this.delay = 500;
      this.openedAt = null;
      const wait = Math.min(this.delay, this.agent.config.reconnectMax);
      this.delay *= 2;
      log(`gateway ${why}; reconnecting in ${wait} ms`);
      this.timer = setTimeout(() => this.connect(), wait);
    };
    const connectTimer = setTimeout(() => {
      if (ws.readyState === 0) retry(`connect timed out after ${this.agent.config.connectTimeout} ms`);
    }, this.agent.config.connectTimeout);
    ws.addEventListener("open", () => {
      clearTimeout(connectTimer);
      if (ended) return; // given up already

      // The browser-style WebSocket cannot set headers: authenticate with the first frame.
      ws.send(JSON.stringify({ type: "auth", apiKey: this.agent.apiKey }));
      this.openedAt = Date.now();
      this.connected = true;
      log(`gateway connected: ${url}`);
      for (const frame of this.outbox.splice(0)) this.send(frame);
      this.pinger = setInterval(() => this.send({ type: "ping" }), this.agent.config.pingInterval);
    });
    ws.addEventListener("message", (event) => { if (!ended) this.onFrame(event.data); });
    ws.addEventListener("close", (event) => retry(`closed (code ${event.code})`));
    ws.addEventListener("error", (event) => retry(`error (${(event && event.message) || "connection failed"})`));
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    if (this.ws) this.ws.close(1000);
  }

  send(frame) {
    if (this.ws && this.ws.readyState === 1) this.ws.send(JSON.stringify(frame));
    else if (frame.type !== "ping") this.outbox.push(frame); // sent on reconnect
  }

  onFrame(raw) {
    let frame;
    try { frame = JSON.parse(raw); } catch { return log("ignoring a frame that is not JSON"); }
    const store = this.agent.store;
    if (frame.type === "task.assign") {
      this.send({ type: "task.ack", deliveryId: frame.deliveryId }); // at least once: ack, dedupe
      const task = frame.task || {};
      const message = frame.message || {};
      const known = store.tasks.get(task.id);
      // The same messageId: a re-delivery, answered with where the task is. The same task
      // with a new messageId: the platform's retry (or a reassignment back here), run again.
      if (known && (!message.messageId || known.messageIds.has(message.messageId))) {
        return this.send({ type: "task.update", taskId: task.id, status: known.task.status, artifacts: known.task.artifacts });
      }
      if (known && known.controller) known.controller.abort(); // the old attempt stops
      if (!message.metadata) message.metadata = {};
      if (frame.skillId && !message.metadata.skillId) message.metadata.skillId = frame.skillId;
      log(`task ${task.id} assigned over the WebSocket${known ? " again (a retry)" : ""}`);
      const entry = store.start(message, { taskId: task.id, contextId: task.contextId, via: "websocket" });
      if (known) for (const id of known.messageIds) entry.messageIds.add(id); // still answered
    } else if (frame.type === "task.message" || frame.type === "task.cancel") {
      // Acked whether or not the task is known here (the store is in memory: after a
      // restart none is); unacked, it would be sent again on every connection.
      if (frame.deliveryId) this.send({ type: "task.ack", deliveryId: frame.deliveryId });
      const entry = store.tasks.get(frame.taskId);
      if (!entry) return log(`${frame.type} for unknown task ${frame.taskId}: acknowledged`);
      if (frame.type === "task.message") store.reply(entry, frame.message || {});
      else if (!store.cancel(entry)) this.update(entry, {});
    } else if (frame.type === "error") {
      log(`gateway error ${frame.code}: ${frame.message}`);
    }
  }

  update(entry, { artifacts }) {
    const frame = { type: "task.update", taskId: entry.task.id, status: entry.task.status };
    if (artifacts && artifacts.length) frame.artifacts = artifacts;
    this.send(frame);
  }
}

// ---------------------------------------------------------------------------------------
// A default handler, so `node adapter.js` works out of the box
// ---------------------------------------------------------------------------------------

// A value fitting `schema`, copied from `hint` where the hint's type fits.
function exampleForSchema(schema, hint) {
  schema = schema || {};
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length) {
    return schema.enum.includes(hint) ? hint : schema.enum[0];
  }
  const union = schema.oneOf || schema.anyOf;
  if (Array.isArray(union) && union.length) return exampleForSchema(union[0], hint);
  let type = schema.type || (schema.properties ? "object" : "string");
  if (Array.isArray(type)) type = type[0];
  if (type === "object") {
    const hints = hint && typeof hint === "object" && !Array.isArray(hint) ? hint : {};
    const props = schema.properties || {};
    const required = schema.required || [];
    const out = {};
    for (const key of Object.keys(props)) {
      if (required.includes(key) || key in hints) out[key] = exampleForSchema(props[key], hints[key]);
    }
    return out;
  }
  if (type === "array") return Array.from({ length: schema.minItems || 0 }, () => exampleForSchema(schema.items));
  if (type === "integer" || type === "number") {
    const ok = typeof hint === "number" && (type === "number" || Number.isInteger(hint)) &&
      !(schema.minimum !== undefined && hint < schema.minimum) &&
      !(schema.maximum !== undefined && hint > schema.maximum);
    return ok ? hint : (schema.minimum ?? 0);
  }
  if (type === "boolean") return typeof hint === "boolean" ? hint : true;
  if (type === "null") return null;
  if (typeof hint === "string" && hint.length >= (schema.minLength || 0) && !schema.pattern && !schema.format) return hint;
  if (schema.format === "date-time") return new Date().toISOString();
  return "x".repeat(schema.minLength || 0) || "ok";
}

// The demo handler, like the reference agent's: the output is the simplest that fits the
// skill's output_schema, copying input fields. The input's demo controls (declared by the
// example CE skill) show every path: "demo": {"ask": "a question?" | true,
// "fail": "a reason" | true, "delaySeconds": 5}.
async function demoHandler({ input, answers, skill, signal }) {
  const demo = (input && typeof input.demo === "object" && input.demo) || {};
  if (demo.delaySeconds > 0) {
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, demo.delaySeconds * 1000);
      signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); });
    });
  }
  if (demo.fail) return { fail: `Failed: ${typeof demo.fail === "string" ? demo.fail : "asked to fail (demo.fail)"}` };
  if (demo.ask && !answers.length) {
    return { question: typeof demo.ask === "string" ? demo.ask : "Who will use the product: consumers, professionals, or both?" };
  }
  const last = answers[answers.length - 1];
  const hints = { ...input, ...(answers.length ? { answer: last, notes: last } : {}) };
  return { output: exampleForSchema(skill.output_schema, hints), text: "Done." };
}

// ---------------------------------------------------------------------------------------
// startAgent: everything together
// ---------------------------------------------------------------------------------------

// The HTTP side and task store for `skill`, without the platform (handy for local tests):
//   const agent = await serveAgent({ skill, handler, port: 3005 });  ...  agent.stop();
async function serveAgent(options = {}) {
  const config = options.config || configFromEnv(process.env, options);
  const handler = options.handler || demoHandler;
  const agent = { config, skill: null, store: null, apiKey: null };
  agent.setSkill = (skill) => {
    agent.skill = skill;
    agent.store = new TaskStore(skill, handler, (entry, update) => {
      if (entry.via === "websocket") agent.gateway.update(entry, update);
    });
  };
  if (options.skill) agent.setSkill(options.skill);
  agent.card = () => ({
    name: config.agentName,
    description: `Node.js agent offering ${agent.skill.id}`,
    version: "1.0.0",
    supportedInterfaces: [{
      url: config.publicUrl || `http://${config.host}:${config.port}`,
      protocolBinding: "HTTP+JSON",
      protocolVersion: "1.0",
    }],
    capabilities: { streaming: false, pushNotifications: false },
    defaultInputModes: ["application/json", "text/plain"],
    defaultOutputModes: ["application/json", "text/plain"],
    skills: [{
      id: agent.skill.id,
      name: agent.skill.name || agent.skill.id,
      description: agent.skill.description || agent.skill.id,
      tags: agent.skill.tags || [],
    }],
  });
  agent.gateway = new Gateway(agent);
  agent.server = http.createServer(makeHttpHandler(agent));
  agent.listen = () => listen(agent.server, config);
  agent.toggleHttp = async () => {
    if (agent.server.listening) {
      await new Promise((resolve) => { agent.server.close(resolve); agent.server.closeAllConnections(); });
      log("A2A HTTP side stopped: the platform will fall back to the WebSocket");
    } else {
      await agent.listen();
      log(`A2A HTTP+JSON on http://${config.host}:${config.port}`);
    }
  };
  agent.stop = () => {
    agent.gateway.stop();
    agent.server.close();
    agent.server.closeAllConnections();
  };
  if (config.http) await agent.listen();
  return agent;
}

function listen(server, config) {
  return new Promise((resolve, reject) => {
    const onError = (err) => reject(err.code === "EADDRINUSE"
      ? new ConfigError(`port ${config.port} on ${config.host} is already in use: set A2A_PORT`)
      : new ConfigError(`cannot listen on ${config.host}:${config.port}: ${err.message}`));
    server.once("error", onError);
    server.listen(config.port, config.host, () => { server.off("error", onError); resolve(); });
  });
}

// Register with the platform, serve A2A over HTTP, connect to the gateway: the whole agent.
async function startAgent(options = {}) {
  const config = configFromEnv(process.env, options);
  if (!config.http && typeof globalThis.WebSocket !== "function") {
    // Neither way in: the platform could never reach it. Said before registering anything.
    throw new ConfigError("A2A_HTTP=off and this Node.js has no WebSocket, so no task could reach the agent: " +
      "use Node 22+ (or node --experimental-websocket), or turn the HTTP side on");
  }
  // Listen first, so "port in use" is a start-up error; until registered it answers 503.
  const agent = await serveAgent({ ...options, config, skill: null });
  try {
    const skill = await fetchSkill(config);
    agent.apiKey = await register(config, skill);
    agent.setSkill(skill);
  } catch (err) {
    agent.stop();
    throw err;
  }
  if (config.http) log(`A2A HTTP+JSON on http://${config.host}:${config.port}`);
  agent.gateway.start();
  log(`agent ${config.agentId} ready (skill ${agent.skill.id})`);
  return agent;
}

function main() {
  startAgent().then((agent) => {
    const shutdown = () => { log("shutting down"); agent.stop(); process.exit(0); };
    process.on("SIGINT", shutdown);
    process.on("SIGTERM", shutdown);
    process.on("SIGUSR1", () => agent.toggleHttp().catch((err) => log(err.message)));
  }).catch((err) => {
    const text = err instanceof ConfigError ? err.message : (err && err.stack) || String(err);
    console.error(`adapter.js: error: ${text.split("\n").join(" ")}`);
    process.exit(2);
  });
}

module.exports = { startAgent, serveAgent, demoHandler, exampleForSchema, ConfigError };

if (require.main === module) main();
