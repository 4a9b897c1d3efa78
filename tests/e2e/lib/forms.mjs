// A browser without a browser: a cookie jar, redirects followed by hand, and HTML forms read
// and submitted as a person would (test-peers.md 1). latch's login pages are plain forms.

const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", '#39': "'", '#x27': "'", '#x2f': '/', '#x2F': '/', '#47': '/' };

export function decodeHtml(s) {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (m, e) => {
    if (e in ENTITIES) return ENTITIES[e];
    if (e.startsWith('#x')) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return String.fromCodePoint(parseInt(e.slice(1), 10));
    return m;
  });
}

function attr(tag, name) {
  const m = tag.match(new RegExp(`\\s${name}="([^"]*)"`, 'i'));
  return m ? decodeHtml(m[1]) : undefined;
}

/** The forms of a page: [{action, method, fields: [[name, value]]}] (hidden and text inputs). */
export function parseForms(html) {
  const forms = [];
  const re = /<form\b([^>]*)>([\s\S]*?)<\/form>/gi;
  let m;
  while ((m = re.exec(html))) {
    const fields = [];
    for (const input of m[2].matchAll(/<input\b[^>]*>/gi)) {
      const name = attr(input[0], 'name');
      if (name !== undefined) fields.push([name, attr(input[0], 'value') ?? '']);
    }
    forms.push({ action: attr(m[1], 'action') ?? '', method: (attr(m[1], 'method') ?? 'get').toUpperCase(), fields });
  }
  return forms;
}

export class FormClient {
  constructor(base) {
    this.base = base;
    this.cookies = new Map();
    this.acceptLanguage = undefined;
  }

  #cookieHeader() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  /** One request, no redirect followed. Returns {status, url, location (absolute), html, headers}. */
  async request(url, { method = 'GET', form } = {}) {
    const abs = new URL(url, this.base).href;
    const headers = {};
    if (this.cookies.size) headers.cookie = this.#cookieHeader();
    if (this.acceptLanguage) headers['accept-language'] = this.acceptLanguage;
    let body;
    if (form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(form).toString();
    }
    const r = await fetch(abs, { method, headers, body, redirect: 'manual' });
    for (const c of r.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      this.cookies.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
    }
    const loc = r.headers.get('location');
    return { status: r.status, url: abs, location: loc ? new URL(loc, abs).href : undefined, html: await r.text(), headers: r.headers };
  }

  /**
   * Walks from `url` until a redirect to `stopPrefix` (the client's redirect URI), filling the
   * inputs named in `answers` and submitting the first form that asks for one of them (or the
   * only form of a page, e.g. form_post). Returns {callback, pages}.
   */
  async walk(url, stopPrefix, answers = {}, { maxSteps = 20 } = {}) {
    const pages = [];
    let r = await this.request(url);
    for (let i = 0; i < maxSteps; i++) {
      pages.push(r);
      if (r.location) {
        if (r.location.startsWith(stopPrefix)) return { callback: r.location, pages };
        r = await this.request(r.location);
        continue;
      }
      if (r.status !== 200) throw new Error(`unexpected ${r.status} at ${r.url}:\n${r.html.slice(0, 2000)}`);
      const forms = parseForms(r.html);
      const wanted = forms.find((f) => f.fields.some(([n]) => n in answers)) ?? (forms.length === 1 ? forms[0] : undefined);
      if (!wanted) throw new Error(`no form to submit at ${r.url}:\n${r.html.slice(0, 2000)}`);
      const fields = wanted.fields.map(([n, v]) => [n, n in answers ? answers[n] : v]);
      for (const n of Object.keys(answers)) if (wanted.fields.some(([f]) => f === n)) delete answers[n]; // each answer once
      const action = new URL(wanted.action || r.url, r.url).href;
      if (action.startsWith(stopPrefix)) return { callback: action, form: fields, pages };
      r = await this.request(action, { method: wanted.method, form: fields });
    }
    throw new Error(`no redirect to ${stopPrefix} after ${maxSteps} steps; last page:\n${r.html.slice(0, 2000)}`);
  }
}
