// Edge URLs the runner dials. `ws` takes ws:// and wss://, so http(s) bases are mapped.

export function edgeSocketUrl(brokerUrl: string, path: string): string {
  const url = new URL(path, `${brokerUrl}/`);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.toString();
}

export function linkPath(tenant: string, sessionId: string): string {
  return `internal/sessions/${encodeURIComponent(tenant)}/${encodeURIComponent(sessionId)}/link`;
}

/** Where a runner reports that the tenant bound trimmed the log of a session it does not host. */
export function retainedPath(tenant: string, sessionId: string): string {
  return `internal/sessions/${encodeURIComponent(tenant)}/${encodeURIComponent(sessionId)}/retained`;
}

export const CONTROL_PATH = "internal/runners/connect";
