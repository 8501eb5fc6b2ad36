// Sends and closes on accepted sockets. A socket may close between listing and sending;
// that is normal in a fan-out and not an error.

export function sendQuietly(ws: WebSocket, data: string | ArrayBuffer | ArrayBufferView): void {
  try {
    ws.send(data);
  } catch {
    // closed meanwhile
  }
}

export function closeQuietly(ws: WebSocket, code: number, reason: string): void {
  try {
    ws.close(code, reason);
  } catch {
    // already closed
  }
}
