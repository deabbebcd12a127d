// The console's calls: the agentwire.v1 gRPC methods as JSON (POST /api/<service>/<method>),
// with the API key the operator entered (kept for this browser tab only).

const KEY = "agentwire.key";

export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** A failed call: `code` is the gRPC code's name (`PERMISSION_DENIED`, ...). */
export class ApiError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function request(body, signal) {
  const headers = { "content-type": "application/json" };
  const key = apiKey();
  if (key) headers.authorization = `Bearer ${key}`;
  return { method: "POST", headers, body: JSON.stringify(body || {}), signal };
}

async function failure(response) {
  try {
    const { error } = await response.json();
    return new ApiError(error.code, error.message);
  } catch {
    return new ApiError("UNKNOWN", `${response.status} ${response.statusText}`);
  }
}

/** Calls `method` (`RunService/ListRuns`) with `body`; resolves to its response. */
export async function call(method, body, signal) {
  const response = await fetch(`/api/agentwire.v1.${method}`, request(body, signal));
  if (!response.ok) throw await failure(response);
  return response.json();
}

/**
 * Calls a server-streaming `method`, handing each message to `onMessage` as it arrives;
 * resolves when the stream ends, rejects with its error. Abort with `signal`.
 */
export async function stream(method, body, onMessage, signal) {
  const response = await fetch(`/api/agentwire.v1.${method}`, request(body, signal));
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += value;
    let newline;
    while ((newline = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      if (!line) continue;
      const message = JSON.parse(line);
      if (message.error && Object.keys(message).length === 1) {
        throw new ApiError(message.error.code, message.error.message);
      }
      onMessage(message);
    }
  }
}
