// Where a webhook may point (docs/security.md, "Webhooks"): http(s) only, at most 2 KiB, and,
// unless WEBHOOK_ALLOW_PRIVATE=1, not at this host or a private network: loopback, link-local
// (the cloud metadata address 169.254.169.254), RFC 1918, CGNAT, unique-local and unspecified
// addresses, and `localhost` names. Otherwise a tenant could make the edge POST to Redis on
// 127.0.0.1:6379, a runner's ports or the metadata service. The edge also never follows a
// redirect from a receiver (tenant/tenant-webhooks.ts), so a public URL cannot bounce there.
// The rule reads the URL only: a public name whose DNS answers a private address is not caught
// here (docs/security.md says what covers that).

export const MAX_WEBHOOK_URL = 2048;

/** Why the URL is refused, or null when it may be used. */
export function webhookUrlProblem(raw: string, allowPrivate: boolean): string | null {
  if (raw.length > MAX_WEBHOOK_URL) return `url: at most ${MAX_WEBHOOK_URL} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "url: not a URL";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "url: http or https only";
  if (url.username || url.password) return "url: no credentials in the URL (sign with the secret instead)";
  if (allowPrivate) return null;
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  if (privateHost(host)) {
    return `url: ${url.hostname} is this host or a private network (refused unless WEBHOOK_ALLOW_PRIVATE=1)`;
  }
  return null;
}

/** Whether a URL's hostname (lower case, as `URL` normalizes it) names a local or private place. */
export function privateHost(host: string): boolean {
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".local") || host.endsWith(".internal")) return true;
  if (host.startsWith("[") && host.endsWith("]")) return privateIpv6(host.slice(1, -1));
  const v4 = ipv4(host);
  if (v4) return privateIpv4(v4);
  // A name with no dot is resolved by the host's search domains: never the public internet.
  return !host.includes(".");
}

/** `URL` already turns 127.1, 0x7f.1 and 2130706433 into dotted quads. */
function ipv4(host: string): number[] | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  return parts.every((p) => p <= 255) ? parts : null;
}

function privateIpv4([a, b]: number[]): boolean {
  return (
    a === 0 || // this network
    a === 10 ||
    a === 127 ||
    (a === 100 && b >= 64 && b <= 127) || // CGNAT
    (a === 169 && b === 254) || // link-local, the metadata service
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0) || // IETF protocol assignments
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    a >= 224 // multicast, reserved, broadcast
  );
}

/** The address's eight 16-bit groups, `URL`'s normal form (compressed with ::, lower case). */
function groups(address: string): number[] | null {
  let text = address;
  // An embedded IPv4 tail (::ffff:1.2.3.4): URL normalizes it to hex, but be safe.
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const v4 = ipv4(tail[1]);
    if (!v4) return null;
    text = `${text.slice(0, -tail[1].length)}${((v4[0] << 8) | v4[1]).toString(16)}:${((v4[2] << 8) | v4[3]).toString(16)}`;
  }
  const [head, rest] = text.split("::");
  const left = head ? head.split(":") : [];
  const right = rest ? rest.split(":") : [];
  const fill = text.includes("::") ? 8 - left.length - right.length : 0;
  const all = [...left, ...Array<string>(Math.max(fill, 0)).fill("0"), ...right];
  if (all.length !== 8 || all.some((g) => !/^[0-9a-f]{1,4}$/.test(g))) return null;
  return all.map((g) => Number.parseInt(g, 16));
}

function privateIpv6(address: string): boolean {
  const g = groups(address);
  if (!g) return true; // unreadable: refuse
  if (g.every((x) => x === 0)) return true; // ::
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return true; // ::1
  if ((g[0] & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local
  if ((g[0] & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((g[0] & 0xff00) === 0xff00) return true; // multicast
  // IPv4-mapped (::ffff:a.b.c.d) and the NAT64 prefix (64:ff9b::a.b.c.d): the IPv4 address decides.
  const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0);
  const compat = g.slice(0, 6).every((x) => x === 0);
  if (mapped || nat64 || compat) return privateIpv4([g[6] >> 8, g[6] & 0xff, g[7] >> 8, g[7] & 0xff]);
  return false;
}
