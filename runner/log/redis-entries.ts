// A stream entry of the Redis log as ioredis's `*Buffer` commands return it, and the fields it
// keeps (redis-log.ts, at its top): `d` the bytes, `t` when the runner read them, `s` "1" for
// stderr, `z` the terminal's size. Pure: no ioredis here (redis-log.ts is the only file that
// imports it).
import { type ChunkMeta, UNKNOWN_META } from "../../shared/protocol.js";

export type Entry = [id: Buffer, fields: Buffer[]];

export function entryOffset([id]: Entry): number {
  const text = id.toString("latin1");
  return Number(text.slice(0, text.indexOf("-")));
}

/** The fields after `d` that keep a chunk's meta; the defaults (stdout, no terminal) are left out. */
export function metaFields(meta: ChunkMeta): string[] {
  const fields = ["t", String(meta.at)];
  if (meta.stream === "stderr") fields.push("s", "1");
  if (meta.cols > 0 && meta.rows > 0) fields.push("z", `${meta.cols}x${meta.rows}`);
  return fields;
}

function field(fields: Buffer[], name: string): Buffer | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i].toString("latin1") === name) return fields[i + 1];
  return undefined;
}

export function entryData([, fields]: Entry): Buffer {
  return field(fields, "d") ?? Buffer.alloc(0);
}

export function entryMeta([, fields]: Entry): ChunkMeta {
  const at = Number(field(fields, "t")?.toString("latin1"));
  const size = /^(\d+)x(\d+)$/.exec(field(fields, "z")?.toString("latin1") ?? "");
  if (!Number.isFinite(at) && !size) return UNKNOWN_META;
  return {
    stream: field(fields, "s")?.toString("latin1") === "1" ? "stderr" : "stdout",
    at: Number.isFinite(at) && at >= 0 ? at : 0,
    cols: size ? Number(size[1]) : 0,
    rows: size ? Number(size[2]) : 0,
  };
}
