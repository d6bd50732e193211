// tests/browser/a11y.mjs - accessibility checks run inside a console page: the problems found
// (an empty list when there are none), each a sentence naming the element.
//   - the document has lang, a title and exactly one h1; heading levels never skip (h2 -> h4);
//   - every visible form control has a label (<label for>, a wrapping label or aria-label),
//     every button and link an accessible name, every table header cell a scope;
//   - every visible text meets WCAG AA contrast against the background it is drawn on
//     (4.5:1; 3:1 for large text), computed from the browser's resolved colours.
export async function problems(page) {
  return page.evaluate(() => {
    const out = [];
    const name = (el) => `<${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}> "${
      (el.textContent || "").trim().slice(0, 40)}"`;
    const visible = (el) => {
      const r = el.getBoundingClientRect();
      const s = getComputedStyle(el);
      return r.width > 1 && r.height > 1 && s.visibility !== "hidden" && s.display !== "none";
    };
    if (!document.documentElement.lang) out.push("the document has no lang");
    if (!document.title.trim()) out.push("the document has no title");
    const h1 = document.querySelectorAll("h1").length;
    if (h1 !== 1) out.push(`${h1} h1 headings (want 1)`);
    let level = 0;
    for (const h of document.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
      const l = Number(h.tagName[1]);
      if (level && l > level + 1) out.push(`heading ${name(h)} skips from h${level} to h${l}`);
      level = l;
    }
    for (const el of document.querySelectorAll("input, select, textarea")) {
      if (el.type === "hidden" || !visible(el)) continue;
      if (!(el.labels && el.labels.length) && !el.getAttribute("aria-label"))
        out.push(`form control ${name(el)} has no label`);
    }
    for (const el of document.querySelectorAll("button, a[href]")) {
      if (!(el.textContent || "").trim() && !el.getAttribute("aria-label"))
        out.push(`${name(el)} has no accessible name`);
    }
    for (const th of document.querySelectorAll("thead th"))
      if (!th.getAttribute("scope")) out.push(`header cell ${name(th)} has no scope`);
    // Contrast.
    const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => {
      const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const background = (el) => {
      for (let e = el; e; e = e.parentElement) {
        const c = rgb(getComputedStyle(e).backgroundColor);
        if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const seen = new Set();
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!n.textContent.trim() || !el || seen.has(el) || !visible(el)) continue;
      seen.add(el);
      const s = getComputedStyle(el);
      const fg = lum(rgb(s.color)), bg = lum(background(el));
      const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
      const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
      const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
      if (ratio < need)
        out.push(`${name(el)}: contrast ${ratio.toFixed(2)}:1 (${s.color} on ` +
                 `rgb(${background(el).join(", ")}); want ${need}:1)`);
    }
    return out;
  });
}
