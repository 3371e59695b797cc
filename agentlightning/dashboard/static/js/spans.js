// What a span means to a person: its kind (LLM call, tool, agent, reward, exception...), its reward, its
// exceptions, the conversation of an LLM call, and the tree of a trace. Pure functions over the spans the store
// returns; they understand the attributes written by the LLM proxy, the OpenTelemetry/OpenInference
// instrumentation and Agent Lightning's own emitters (see agentlightning/semconv.py).

export const REWARD_SPAN = "agentlightning.reward";
export const ANNOTATION_SPAN = "agentlightning.annotation";
export const EXCEPTION_SPAN = "agentlightning.exception";
const REWARD_PREFIX = "agentlightning.reward";
const LANGGRAPH_DEFAULT_NAME = "LangGraph"; // the name of a compiled graph nobody named: not an agent
const AGENTOPS_KEYS = ["agentops.task.output", "agentops.entity.output"];

const isNumber = (value) => typeof value === "number" && Number.isFinite(value);
const attrs = (span) => (span && span.attributes && typeof span.attributes === "object" ? span.attributes : {});

/** Items flattened under `prefix.<i>.<field>` as an array of {field: value} (gaps skipped). */
export function indexed(attributes, prefix) {
  const items = [];
  const start = `${prefix}.`;
  for (const [key, value] of Object.entries(attributes)) {
    if (!key.startsWith(start)) continue;
    const rest = key.slice(start.length);
    const dot = rest.indexOf(".");
    const index = Number(dot === -1 ? rest : rest.slice(0, dot));
    if (!Number.isInteger(index) || index < 0 || index > 10000) continue;
    items[index] = items[index] || {};
    items[index][dot === -1 ? "" : rest.slice(dot + 1)] = value;
  }
  return items.filter(Boolean);
}

function parseJson(text) {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function agentopsReward(attributes) {
  for (const key of AGENTOPS_KEYS) {
    if (!(key in attributes)) continue;
    let payload = attributes[key];
    if (typeof payload === "string") payload = parseJson(payload.replace(/'/g, '"').replace(/\bNone\b/g, "null"));
    if (payload && typeof payload === "object" && payload.type === "reward") return payload;
  }
  return null;
}

/** {value, dimensions: [{name, value}]} of a reward span (primary dimension first), or null. */
export function rewardOf(span) {
  const attributes = attrs(span);
  const dimensions = [];
  for (const item of indexed(attributes, REWARD_PREFIX)) {
    if (isNumber(item.value)) dimensions.push({ name: String(item.name ?? dimensions.length), value: item.value });
  }
  let value = null;
  const payload = agentopsReward(attributes);
  if (payload) value = isNumber(payload.value) ? payload.value : null;
  else if (span && span.name === REWARD_SPAN && isNumber(attributes.reward)) value = attributes.reward;
  if (value === null && dimensions.length) value = dimensions[0].value;
  if (value === null) return null;
  if (!dimensions.length) dimensions.push({ name: "primary", value });
  return { value, dimensions };
}

/** The reward of the last reward span in sequence order, or null (as `find_final_reward`). */
export function finalReward(spans) {
  const ordered = [...spans].sort((a, b) => (a.sequence_id ?? 0) - (b.sequence_id ?? 0));
  for (let index = ordered.length - 1; index >= 0; index -= 1) {
    const reward = rewardOf(ordered[index]);
    if (reward) return reward.value;
  }
  return null;
}

/** Exceptions recorded by a span: an `agentlightning.exception` span and OpenTelemetry "exception" events. */
export function exceptionsOf(span) {
  const found = [];
  const attributes = attrs(span);
  if (span && span.name === EXCEPTION_SPAN && (attributes["exception.type"] || attributes["exception.message"])) {
    found.push({
      type: String(attributes["exception.type"] ?? "Exception"),
      message: String(attributes["exception.message"] ?? ""),
      stacktrace: attributes["exception.stacktrace"] ? String(attributes["exception.stacktrace"]) : "",
    });
  }
  for (const event of Array.isArray(span?.events) ? span.events : []) {
    if (!event || event.name !== "exception") continue;
    const eventAttributes = event.attributes || {};
    const exception = {
      type: String(eventAttributes["exception.type"] ?? "Exception"),
      message: String(eventAttributes["exception.message"] ?? ""),
      stacktrace: eventAttributes["exception.stacktrace"] ? String(eventAttributes["exception.stacktrace"]) : "",
    };
    const duplicate = found.some((item) => item.type === exception.type && item.message === exception.message);
    if (!duplicate) found.push(exception);
  }
  return found;
}

// "ValueError: ...", "asyncio.TimeoutError: ...": a name that reads as an exception's, then ": ".
const TYPE_PREFIX = /^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Interrupted|Timeout|Cancelled|Failure)): /;

/**
 * An exception from a reason string and an optional type: the runner records `error = "ValueError: bad"` with
 * `error_type = "ValueError"`, which reads as {type: "ValueError", message: "bad"}; a reason that does not start with
 * its type (`AgentTimeout`: "the agent ran past its 5 s timeout") keeps its whole text as the message.
 */
export function splitReason(reason, type) {
  const text = String(reason);
  if (typeof type === "string" && type) {
    return { type, message: text.startsWith(`${type}: `) ? text.slice(type.length + 2) : text === type ? "" : text };
  }
  const match = TYPE_PREFIX.exec(text);
  return match ? { type: match[1], message: text.slice(match[0].length) } : { type: "Error", message: text };
}

/**
 * An exception described in attempt metadata: the runner's `error` (reason text) with `error_type` and `traceback`,
 * or {error|exception: {type, message, traceback}}, or a bare traceback.
 */
export function exceptionFromMetadata(metadata) {
  if (!metadata || typeof metadata !== "object") return null;
  for (const key of ["exception", "error"]) {
    const value = metadata[key];
    if (typeof value === "string" && value) return { ...splitReason(value, metadata.error_type ?? metadata.exception_type), stacktrace: String(metadata.traceback ?? "") };
    if (value && typeof value === "object") {
      return {
        type: String(value.type ?? value.exception_type ?? "Error"),
        message: String(value.message ?? value.msg ?? ""),
        stacktrace: String(value.traceback ?? value.stacktrace ?? metadata.traceback ?? ""),
      };
    }
  }
  if (typeof metadata.traceback === "string" && metadata.traceback) {
    const lines = metadata.traceback.trim().split("\n");
    const last = lines[lines.length - 1] || "Error";
    const colon = last.indexOf(":");
    return {
      type: colon > 0 ? last.slice(0, colon) : last,
      message: colon > 0 ? last.slice(colon + 1).trim() : "",
      stacktrace: metadata.traceback,
    };
  }
  return null;
}

export const isError = (span) => span?.status?.status_code === "ERROR";

/** The kind of a span, for colour and for choosing how to show it. */
export function spanKind(span) {
  const attributes = attrs(span);
  const name = String(span?.name ?? "");
  if (rewardOf(span)) return "reward";
  if (name === EXCEPTION_SPAN) return "exception";
  const kind = String(attributes["openinference.span.kind"] ?? "").toUpperCase();
  if (
    kind === "LLM" ||
    "prompt_token_ids" in attributes ||
    "gen_ai.prompt.0.role" in attributes ||
    /^openai\.(chat\.)?completion/.test(name)
  ) {
    return "llm";
  }
  if (kind === "TOOL" || "tool.name" in attributes) return "tool";
  if (kind === "AGENT" || "agent.name" in attributes || genAiAgentName(span)) return "agent";
  if (name === ANNOTATION_SPAN) return "annotation";
  if (name === "agentlightning.message") return "message";
  if (name === "agentlightning.object") return "object";
  if (name === "agentlightning.operation") return "operation";
  if (name === "agentlightning.virtual") return "virtual";
  if (kind === "CHAIN") return "chain";
  return "span";
}

export const KIND_LABELS = {
  llm: "LLM call",
  tool: "tool",
  agent: "agent",
  reward: "reward",
  exception: "exception",
  annotation: "annotation",
  message: "message",
  object: "object",
  operation: "operation",
  virtual: "virtual",
  chain: "chain",
  span: "span",
};

const spanKey = (span) => `${span.trace_id ?? ""}/${span.span_id ?? ""}`;

/**
 * The spans as a forest: {roots, nodes} where each node is {span, children, depth, orphan}. A span whose parent
 * was not captured becomes a root marked `orphan`. Siblings are ordered by start time, then sequence id.
 */
export function buildTree(spans) {
  const nodes = new Map();
  for (const span of spans) nodes.set(spanKey(span), { span, children: [], depth: 0, orphan: false });
  const roots = [];
  for (const node of nodes.values()) {
    const parentId = node.span.parent_id;
    const parent = parentId ? nodes.get(`${node.span.trace_id ?? ""}/${parentId}`) : null;
    if (parent && parent !== node) parent.children.push(node);
    else {
      node.orphan = Boolean(parentId);
      roots.push(node);
    }
  }
  const order = (a, b) =>
    (a.span.start_time ?? Infinity) - (b.span.start_time ?? Infinity) ||
    (a.span.sequence_id ?? 0) - (b.span.sequence_id ?? 0);
  roots.sort(order);
  const stack = roots.map((node) => [node, 0]);
  const visited = new Set();
  while (stack.length) {
    const [node, depth] = stack.pop();
    if (visited.has(node)) continue; // a cycle in parent ids cannot loop forever
    visited.add(node);
    node.depth = depth;
    node.children.sort(order);
    for (const child of node.children) stack.push([child, depth + 1]);
  }
  return { roots, nodes };
}

/** Depth-first order of a forest, skipping the children of nodes whose key is in `collapsed`. */
export function flatten(roots, collapsed = new Set()) {
  const rows = [];
  const visited = new Set();
  const stack = [...roots].reverse();
  while (stack.length) {
    const node = stack.pop();
    if (visited.has(node)) continue;
    visited.add(node);
    rows.push(node);
    if (!collapsed.has(nodeKey(node))) for (let i = node.children.length - 1; i >= 0; i -= 1) stack.push(node.children[i]);
  }
  return rows;
}

export const nodeKey = (node) => spanKey(node.span);

/** Time bounds {start, end} of a set of spans (seconds), ignoring missing times. */
export function timeBounds(spans) {
  let start = Infinity;
  let end = -Infinity;
  for (const span of spans) {
    if (isNumber(span.start_time)) start = Math.min(start, span.start_time);
    if (isNumber(span.end_time)) end = Math.max(end, span.end_time);
    else if (isNumber(span.start_time)) end = Math.max(end, span.start_time);
  }
  if (start === Infinity) return { start: 0, end: 1 };
  return { start, end: Math.max(end, start + 1e-6) };
}

function toolCallsFrom(value, flat) {
  const parsed = parseJson(value);
  const calls = [];
  if (Array.isArray(parsed)) {
    for (const call of parsed) {
      const fn = call?.function ?? call ?? {};
      calls.push({ id: call?.id ?? "", name: String(fn.name ?? ""), arguments: fn.arguments ?? "" });
    }
  }
  for (const call of flat) {
    calls.push({
      id: call.id ?? call["tool_call.id"] ?? "",
      name: String(call.name ?? call["tool_call.function.name"] ?? call["function.name"] ?? ""),
      arguments: call.arguments ?? call["tool_call.function.arguments"] ?? call["function.arguments"] ?? "",
    });
  }
  return calls;
}

function nestedList(item, prefix) {
  // {"tool_calls.0.id": ..} -> [{id: ..}]
  const sub = {};
  for (const [key, value] of Object.entries(item)) if (key.startsWith(`${prefix}.`)) sub[key] = value;
  return indexed(sub, prefix);
}

function messagesFrom(attributes, genAiPrefix, openInferencePrefix) {
  const genAi = indexed(attributes, genAiPrefix);
  if (genAi.length) {
    return genAi.map((item) => ({
      role: String(item.role ?? ""),
      content: item.content ?? "",
      toolCallId: item.tool_call_id ?? null,
      toolCalls: toolCallsFrom(item.tool_calls, nestedList(item, "tool_calls")),
      finishReason: item.finish_reason ?? null,
    }));
  }
  const openInference = indexed(attributes, openInferencePrefix);
  return openInference.map((item) => ({
    role: String(item["message.role"] ?? ""),
    content: item["message.content"] ?? "",
    toolCallId: item["message.tool_call_id"] ?? null,
    toolCalls: toolCallsFrom(undefined, nestedList(item, "message.tool_calls")),
    finishReason: null,
  }));
}

function messagesFromRequest(attributes) {
  const request = parseJson(attributes["agentlightning.llm.request"]);
  if (!request || !Array.isArray(request.messages)) return [];
  return request.messages.map((message) => ({
    role: String(message?.role ?? ""),
    content: typeof message?.content === "string" ? message.content : JSON.stringify(message?.content ?? ""),
    toolCallId: message?.tool_call_id ?? null,
    toolCalls: toolCallsFrom(message?.tool_calls, []),
    finishReason: null,
  }));
}

const firstNumber = (attributes, keys) => {
  for (const key of keys) if (isNumber(attributes[key])) return attributes[key];
  return null;
};

const idCount = (value) => (Array.isArray(value) && value.length ? value.length : null);

/** Everything shown about one LLM call: messages in and out, tools offered, tokens, token ids, model. */
export function llmCall(span) {
  const attributes = attrs(span);
  let prompt = messagesFrom(attributes, "gen_ai.prompt", "llm.input_messages");
  if (!prompt.length) prompt = messagesFromRequest(attributes);
  const response = messagesFrom(attributes, "gen_ai.completion", "llm.output_messages");
  const tools = indexed(attributes, "gen_ai.request.functions").map((item) => ({
    name: String(item.name ?? ""),
    description: item.description ?? "",
    parameters: item.parameters ?? "",
  }));
  const promptIds = idCount(attributes.prompt_token_ids);
  const responseIds = idCount(attributes.response_token_ids) ?? idCount(attributes["gen_ai.completion.0.token_ids"]);
  return {
    model: attributes["gen_ai.response.model"] ?? attributes["gen_ai.request.model"] ?? attributes["llm.model_name"] ?? null,
    prompt,
    response,
    tools,
    finishReason:
      attributes["gen_ai.completion.0.finish_reason"] ?? attributes["llm.finish_reason"] ?? response[0]?.finishReason ?? null,
    promptTokens: firstNumber(attributes, ["gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt"]),
    completionTokens: firstNumber(attributes, [
      "gen_ai.usage.completion_tokens",
      "gen_ai.usage.output_tokens",
      "llm.token_count.completion",
    ]),
    totalTokens: firstNumber(attributes, ["gen_ai.usage.total_tokens", "llm.token_count.total"]),
    promptTokenIds: promptIds,
    responseTokenIds: responseIds,
    tokenIdsCaptured: promptIds !== null && responseIds !== null,
    error: isError(span) ? String(span.status?.description ?? attributes["error.message"] ?? "failed") : null,
  };
}

const hasTokenIds = (span) => Array.isArray(attrs(span).prompt_token_ids) && attrs(span).prompt_token_ids.length > 0;
const parentNode = (tree, node) => (node.span.parent_id ? tree.nodes.get(`${node.span.trace_id ?? ""}/${node.span.parent_id}`) : null);

/**
 * LLM spans that wrap another LLM span (an agent framework's "generation" or LangChain's `ChatOpenAI` around the
 * SDK's chat completion): the inner call is the real one, with the raw request, the response and the token ids.
 * Traces recorded before LangChain's SDK spans were parented have the SDK span as a root of its own: an LLM span
 * without token ids and without an LLM span below it, whose time encloses such a root call with token ids, is its
 * wrapper too (each root call is given to the tightest such span).
 */
export function llmWrappers(tree) {
  const wrappers = new Set();
  const llmNodes = [...tree.nodes.values()].filter((node) => spanKind(node.span) === "llm");
  for (const node of llmNodes) {
    let parent = parentNode(tree, node);
    let guard = 0;
    while (parent && guard < 1000) {
      if (spanKind(parent.span) === "llm") wrappers.add(parent);
      parent = parentNode(tree, parent);
      guard += 1;
    }
  }
  const framework = llmNodes.filter((node) => !wrappers.has(node) && !hasTokenIds(node.span));
  const orphans = llmNodes.filter((node) => !parentNode(tree, node) && hasTokenIds(node.span));
  const within = (outer, inner) =>
    isNumber(outer.start_time) && isNumber(outer.end_time) && isNumber(inner.start_time) && isNumber(inner.end_time) &&
    outer.start_time <= inner.start_time && inner.end_time <= outer.end_time;
  for (const orphan of orphans) {
    let best = null;
    for (const candidate of framework) {
      if (wrappers.has(candidate) || candidate === orphan || !within(candidate.span, orphan.span)) continue;
      if (!best || candidate.span.end_time - candidate.span.start_time < best.span.end_time - best.span.start_time) best = candidate;
    }
    if (best) wrappers.add(best);
  }
  return wrappers;
}

const INVOKE_AGENT = "invoke_agent";

/**
 * The agent an OpenTelemetry GenAI `invoke_agent` span invokes (as `invoked_agent_name` in
 * agentlightning/adapter/trace_tree.py): `gen_ai.agent.name`, else the name in the span name `invoke_agent <name>`,
 * else `gen_ai.agent.id`; null for other spans.
 */
export function genAiAgentName(span) {
  const attributes = attrs(span);
  const named = attributes["gen_ai.agent.name"];
  if (typeof named === "string" && named) return named;
  const name = String(span?.name ?? "");
  const prefixed = name.startsWith(`${INVOKE_AGENT} `);
  if (attributes["gen_ai.operation.name"] !== INVOKE_AGENT && !prefixed) return null;
  const fromName = prefixed ? name.slice(INVOKE_AGENT.length + 1).trim() : "";
  if (fromName) return fromName;
  const id = attributes["gen_ai.agent.id"];
  return typeof id === "string" && id ? id : null;
}

/**
 * The name of the agent a span ran under: the nearest ancestor (or itself) naming one (`agent.name`,
 * `graph.node.id`, or the OpenTelemetry GenAI conventions' `gen_ai.agent.name` / `invoke_agent <name>`). A LangGraph
 * node of a graph given a name reads "graph › node" (`create_react_agent(name="calculator")` gives
 * "calculator › agent").
 */
export function agentNameOf(node, parentOf) {
  let current = node;
  let guard = 0;
  while (current && guard < 1000) {
    const attributes = attrs(current.span);
    const name = attributes["agent.name"] ?? attributes["graph.node.id"] ?? genAiAgentName(current.span);
    if (typeof name === "string" && name) {
      const graph = typeof attributes["langgraph.node"] === "string" ? parentOf(current) : null;
      const graphName = graph ? String(graph.span?.name ?? "") : "";
      return graphName && graphName !== LANGGRAPH_DEFAULT_NAME ? `${graphName} › ${name}` : name;
    }
    current = parentOf(current);
    guard += 1;
  }
  return null;
}

const PROXY_SERVICE = "agentlightning.llm_proxy"; // service.name of the LLM proxy's call records
const PROXY_SPAN_ID = "agentlightning.llm.proxy_span_id"; // on a client span: the span id of the proxy's record

/** True for a span the LLM proxy recorded (the record of a call it relayed). */
export const isProxyRecord = (span) => span?.resource?.attributes?.["service.name"] === PROXY_SERVICE;

function callKeys(span) {
  const attributes = attrs(span);
  const keys = [`span:${span?.span_id ?? ""}`];
  const responseId = attributes["gen_ai.response.id"];
  if (typeof responseId === "string" && responseId) keys.push(`response:${responseId}`);
  const linked = attributes[PROXY_SPAN_ID];
  if (typeof linked === "string" && linked) keys.push(`span:${linked}`);
  return keys;
}

/**
 * LLM-call nodes grouped by call, as agentlightning/adapter/call_identity.py groups spans: nodes whose spans share a
 * `gen_ai.response.id`, or a client span and the proxy record it names (`agentlightning.llm.proxy_span_id`), are one
 * call (with client capture and the LLM proxy both on, each call is recorded by both). Returns [{nodes, record,
 * sources}] in the order of each group's first node: `record` is the proxy's node when there is one (the exact
 * request, answer and token ids), else the first; `sources` are "LLM proxy" and/or "client".
 */
export function callGroups(nodes) {
  const parent = nodes.map((_, index) => index);
  const root = (index) => {
    while (parent[index] !== index) index = parent[index] = parent[parent[index]];
    return index;
  };
  const owner = new Map();
  nodes.forEach((node, index) => {
    for (const key of callKeys(node.span)) {
      if (!owner.has(key)) owner.set(key, index);
      else {
        const [a, b] = [root(owner.get(key)), root(index)];
        if (a !== b) parent[Math.max(a, b)] = Math.min(a, b);
      }
    }
  });
  const groups = new Map();
  nodes.forEach((node, index) => {
    const key = root(index);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(node);
  });
  return [...groups.keys()].sort((a, b) => a - b).map((key) => {
    const members = groups.get(key);
    const record = members.find((node) => isProxyRecord(node.span)) ?? members[0];
    const sources = [...new Set(members.map((node) => (isProxyRecord(node.span) ? "LLM proxy" : "client")))];
    return { nodes: members, record, sources };
  });
}

const SECRET_KEY = /(^|[._-])(api[_-]?key|authorization|password|passwd|secret|access[_-]?token|bearer)$/i;

/** True for attribute names whose values are credentials (shown masked). */
export const isSecretKey = (key) => SECRET_KEY.test(String(key));
