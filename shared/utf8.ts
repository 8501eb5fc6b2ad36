// UTF-8 boundaries, so output chunks never split a character (docs/protocol.md §5, "Offsets,
// replay and the switch to live").

/**
 * Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence.
 * Bytes that are not valid UTF-8 are treated as complete, so binary output still flows.
 */
export function completeUtf8Length(bytes: Uint8Array): number {
  const n = bytes.byteLength;
  // A sequence is at most 4 bytes: only the last 3 can belong to an unfinished one.
  for (let back = 1; back <= Math.min(3, n); back++) {
    const b = bytes[n - back];
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = b >= 0xf0 && b <= 0xf4 ? 4 : b >= 0xe0 && b < 0xf0 ? 3 : b >= 0xc2 && b < 0xe0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

/** Bytes `text` takes as UTF-8 (lone surrogates count as the 3-byte replacement character). */
export function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code < 0xdc00 && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}
