// A tool-calling agent in plain JavaScript with the `openai` npm package, unchanged for training: it reads the
// model's URL and key from OPENAI_BASE_URL / OPENAI_API_KEY (the SDK's own variables), the model name and sampling
// settings from AGL_LLM_MODEL / AGL_LLM_SAMPLING and its task from AGL_TASK, and prints its reward as the last line
// of its output: {"reward": 1}. Agent Lightning's CommandAgent runs it once per rollout.
//
//   AGL_TASK='{"country": "Peru", "capital": "Lima"}' OPENAI_BASE_URL=http://127.0.0.1:8000/v1 \
//     OPENAI_API_KEY=x AGL_LLM_MODEL=smollm2 node agent.mjs
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const CAPITALS = JSON.parse(readFileSync(new URL("./capitals.json", import.meta.url), "utf8"));
const SYSTEM_PROMPT = "Use the tool to look up the answer, then reply with just the city.";
const MAX_TURNS = 3;
const TOOLS = [
  {
    type: "function",
    function: {
      name: "capital_of",
      description: "The capital city of a country.",
      parameters: {
        type: "object",
        properties: { country: { type: "string", description: "The country's name" } },
        required: ["country"],
      },
    },
  },
];
// Worked examples as real turns of the conversation: a question, a tool call, its result, the answer.
export const EXAMPLES = ["Japan", "Kenya"];

export function capitalOf(args) {
  let values;
  try {
    values = typeof args === "string" ? JSON.parse(args) : args;
  } catch {
    return "error: the arguments are not valid JSON";
  }
  const country = String(values?.country ?? "").trim();
  const key = Object.keys(CAPITALS).find((name) => name.toLowerCase() === country.toLowerCase());
  return key ? CAPITALS[key] : `error: unknown country ${JSON.stringify(country)}`;
}

function workedExamples() {
  return EXAMPLES.flatMap((country, index) => {
    const id = `example_${index}`;
    const args = JSON.stringify({ country });
    return [
      { role: "user", content: `What is the capital of ${country}?` },
      { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name: "capital_of", arguments: args } }] },
      { role: "tool", tool_call_id: id, content: CAPITALS[country] },
      { role: "assistant", content: CAPITALS[country] },
    ];
  });
}

export function reward(reply, task) {
  const answer = String(reply ?? "").trim().replace(/[.!]+$/, "").toLowerCase();
  return answer === task.capital.toLowerCase() ? 1 : 0;
}

async function main() {
  const task = JSON.parse(process.env.AGL_TASK);
  const sampling = JSON.parse(process.env.AGL_LLM_SAMPLING || "{}");
  const client = new OpenAI({ maxRetries: 2 }); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
  const messages = [
    { role: "system", content: SYSTEM_PROMPT },
    ...workedExamples(),
    { role: "user", content: `What is the capital of ${task.country}?` },
  ];
  let reply = "";
  const toolCalls = [];
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const completion = await client.chat.completions.create({
      model: process.env.AGL_LLM_MODEL,
      messages,
      tools: TOOLS,
      max_tokens: sampling.max_tokens ?? 48,
      temperature: sampling.temperature ?? 0,
    });
    const message = completion.choices[0].message;
    if (!message.tool_calls?.length) {
      reply = message.content ?? "";
      break;
    }
    messages.push({ role: "assistant", content: message.content, tool_calls: message.tool_calls });
    for (const call of message.tool_calls) {
      toolCalls.push({ name: call.function.name, arguments: call.function.arguments });
      const result = call.function.name === "capital_of" ? capitalOf(call.function.arguments) : "error: unknown tool";
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
  }
  console.log(JSON.stringify({ reward: reward(reply, task), reply, tool_calls: toolCalls }));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error) => {
    console.error(error?.stack ?? String(error));
    process.exit(1);
  });
}
