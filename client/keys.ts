// The tenant's own API keys (`/v1/keys`, docs/protocol.md "Tenants and keys"): list, create and
// revoke, with a key that has every scope. `broker.keys` answers one of these.
import type { KeyInfo, KeyScope, MintedKey } from "../shared/keys.js";
import type { Http } from "./http.js";

export interface CreateKeyOptions {
  /** What the key is allowed; none = every scope. */
  scopes?: KeyScope[];
  /** When it stops working (a Date, or an ISO time). */
  expiresAt?: Date | string;
}

export class KeyCalls {
  constructor(private readonly http: Http) {}

  /** The tenant's keys (never their text: that is shown once, by `create`). */
  async list(): Promise<KeyInfo[]> {
    return (await this.http.json<{ keys: KeyInfo[] }>("GET", "/v1/keys")).keys;
  }

  /** A new key; its `key` is shown this once. */
  create(name: string, options: CreateKeyOptions = {}): Promise<MintedKey> {
    const { scopes, expiresAt } = options;
    const body: Record<string, unknown> = { name };
    if (scopes !== undefined) body.scopes = scopes;
    if (expiresAt !== undefined) body.expiresAt = expiresAt instanceof Date ? expiresAt.toISOString() : expiresAt;
    return this.http.json("POST", "/v1/keys", body);
  }

  /** Revokes at once: the next request with it is 401, its sockets close with 4011. */
  async revoke(keyId: string): Promise<void> {
    await this.http.json("DELETE", `/v1/keys/${encodeURIComponent(keyId)}`);
  }
}
