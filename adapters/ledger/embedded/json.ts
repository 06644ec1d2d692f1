// JSON text with bigint written as a plain number literal (u64 lamports and rentEpoch must not go through a double).

export function toJson(value: unknown): string {
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : toJson(v))).join(',')}]`;
      let out = '';
      for (const key in value) {
        const v = (value as Record<string, unknown>)[key];
        if (v === undefined || typeof v === 'function') continue;
        out += `${out ? ',' : ''}${JSON.stringify(key)}:${toJson(v)}`;
      }
      return `{${out}}`;
    }
    default:
      return 'null';
  }
}
