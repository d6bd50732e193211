// Sign-in nobody else can break: Alice opens /login and stands on GitHub's authorize page
// while 10,000 anonymous clients ask for /login and Mallory's own sign-in link is opened in
// her browser; then she clicks "Sign in as alice" and is signed in.
async function flood(console_, n, workers) {
  let next = 0, bad = 0;
  const one = async () => {
    while (next < n) {
      next++;
      const r = await fetch(`${console_}/login`, { redirect: "manual" });
      await r.arrayBuffer();
      if (r.status !== 303) bad++;
    }
  };
  await Promise.all(Array.from({ length: workers }, one));
  return bad;
}

// Mallory's sign-in, made outside Alice's browser: the link GitHub would send her back with.
async function mallorysLink(console_) {
  const r = await fetch(`${console_}/login`, { redirect: "manual" });
  const page = await (await fetch(r.headers.get("location"))).text();
  return page.match(/id="as-mallory" href="([^"]+)"/)[1].replaceAll("&amp;", "&");
}

export default async function (h, cfg) {
  const out = {};
  const alice = await h.newPage();
  await alice.goto(`${cfg.console}/login`);
  await alice.locator("h1", { hasText: "Sign in to GitHub" }).waitFor();
  const t0 = Date.now();
  out.floodFailures = await flood(cfg.console, 10000, 4);
  out.floodSeconds = (Date.now() - t0) / 1000;

  const forged = await h.newPage();
  const r = await forged.goto(await mallorysLink(cfg.console));
  out.forgedStatus = r.status();
  out.forgedText = await forged.locator("main").textContent();
  await h.shot(forged, "signin-evict-1-forged-link");
  await forged.close();

  await alice.locator("#as-alice").click();
  await alice.locator("h1", { hasText: "Jobs" }).waitFor();
  out.aliceHeader = await alice.locator("header").textContent();
  out.aliceUrl = alice.url();
  await h.shot(alice, "signin-evict-2-alice-signed-in");
  out.cookies = (await alice.context().cookies()).map((c) => c.name);
  return out;
}
