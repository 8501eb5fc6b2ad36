// Base64 for byte arrays, in plain TypeScript: runs in workerd (no Buffer), Node and browsers.

// shared/ compiles without platform typings; every runtime it runs in has these two.
declare function btoa(binary: string): string;
declare function atob(base64: string): string;

const SLICE = 0x8000;

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.byteLength; i += SLICE) {
    binary += String.fromCharCode(...bytes.subarray(i, i + SLICE));
  }
  return btoa(binary);
}

/** Decodes strict base64 (padded, standard alphabet); null when `text` is not base64. */
export function base64ToBytes(text: string): Uint8Array | null {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
