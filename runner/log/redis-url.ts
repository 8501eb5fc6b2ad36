// REDIS_URL (docs/protocol.md §8): one Redis, or several nodes of one Redis Cluster,
// comma-separated: `redis://[user:password@]host:port[/db]` or
// `redis://[user:password@]host:port,host2:port2,…`. Later entries may leave out the scheme and
// credentials; they take the first entry's. Parsed here, without ioredis, so that the configuration
// rejects bad input at start-up with a clear message (runner/config.ts) and the log
// (runner/log/redis-log.ts) connects from the same reading.

export interface RedisNode {
  host: string;
  port: number;
}

export interface RedisTarget {
  /** The nodes named, in order: one for a plain URL (which may still be a cluster node). */
  nodes: RedisNode[];
  /** `rediss://`: TLS to every node. */
  tls: boolean;
  username: string | undefined;
  password: string | undefined;
  /** Database number of a single-node URL; always 0 for a node list (a cluster has only 0). */
  db: number;
}

const DEFAULT_PORT = 6379;

/**
 * Reads REDIS_URL; throws an Error whose message says what is wrong (it never repeats a
 * password: entries are named by position and host).
 */
export function parseRedisUrl(value: string): RedisTarget {
  const entries = value.split(",").map((entry) => entry.trim());
  if (entries.some((entry) => entry === "")) throw new Error("an empty entry in the node list (a stray comma?)");
  const scheme = /^(rediss?):\/\//i.exec(entries[0] ?? "")?.[1]?.toLowerCase();
  if (!scheme) throw new Error("use redis:// or rediss:// (several nodes: redis://host:port,host:port)");
  const several = entries.length > 1;
  const target: RedisTarget = { nodes: [], tls: scheme === "rediss", username: undefined, password: undefined, db: 0 };
  for (const [index, entry] of entries.entries()) {
    const which = several ? `node ${index + 1}` : "the URL";
    const own = /^([a-z][a-z0-9+.-]*):\/\//i.exec(entry)?.[1]?.toLowerCase();
    if (own !== undefined && own !== scheme) {
      throw new Error(`${which} uses ${own}://, the first ${scheme}:// (every node the same: redis:// or rediss://)`);
    }
    let url: URL;
    try {
      url = new URL(own ? entry : `${scheme}://${entry}`);
    } catch {
      throw new Error(`${which} is not ${several ? "host:port or " : ""}${scheme}://host:port`);
    }
    if (!url.hostname) throw new Error(`${which} has no host`);
    const host = url.hostname.replace(/^\[|\]$/g, ""); // IPv6 without its brackets
    const port = url.port ? Number(url.port) : DEFAULT_PORT;
    const username = url.username ? decodeURIComponent(url.username) : undefined;
    const password = url.password ? decodeURIComponent(url.password) : undefined;
    if (index === 0) {
      target.username = username;
      target.password = password;
    } else if ((username !== undefined || password !== undefined) && (username !== target.username || password !== target.password)) {
      throw new Error(`${which} has other credentials than the first (give them once, on the first node)`);
    }
    const path = url.pathname.replace(/^\/+/, "");
    if (path !== "") {
      if (!/^\d+$/.test(path)) throw new Error(`${which}: the path must be a database number, not /${path}`);
      if (several && Number(path) !== 0) throw new Error(`${which} names database ${path}: Redis Cluster has only database 0`);
      target.db = Number(path);
    }
    // ioredis reads options from a single URL's query; a node list has nowhere to put them.
    if (several && url.search) throw new Error(`${which}: options (?…) are not supported in a node list`);
    target.nodes.push({ host, port });
  }
  return target;
}
