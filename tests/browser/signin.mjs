// Sign-in through the stand-in's OAuth pages; each user sees only the jobs of repositories
// they can push to.
async function signIn(h, cfg, login) {
  const page = await h.newPage();
  const r = await page.goto(`${cfg.console}/`);
  const first = { status: r.status(), text: await page.locator("main").textContent() };
  await page.getByRole("link", { name: "Sign in with GitHub" }).click();
  await page.locator(`#as-${login}`).click();
  await page.locator("h1", { hasText: "Jobs" }).waitFor();
  return { page, first };
}

export default async function (h, cfg) {
  const out = {};
  const bob = await signIn(h, cfg, "bob");
  out.before = bob.first;
  await h.shot(bob.page, "signin-1-bob-list");
  out.bobList = await bob.page.locator("main").textContent();
  let r = await bob.page.goto(`${cfg.console}/jobs/${cfg.aliceJob}`);
  out.bobJobStatus = r.status();
  await h.shot(bob.page, "signin-2-bob-forbidden");
  r = await bob.page.goto(`${cfg.console}/jobs/${cfg.aliceJob}/events`);
  out.bobEventsStatus = r.status();
  out.bobCookies = await bob.page.context().cookies();
  await bob.page.close();
  await h.forget();
  const alice = await signIn(h, cfg, "alice");
  out.aliceList = await alice.page.locator("main").textContent();
  await h.shot(alice.page, "signin-3-alice-list");
  r = await alice.page.goto(`${cfg.console}/jobs/${cfg.aliceJob}`);
  out.aliceJobStatus = r.status();
  // A button posted without the session's CSRF token is refused.
  out.forgedCancel = await alice.page.evaluate(async (id) => {
    const res = await fetch(`/jobs/${id}/cancel`, { method: "POST", body: "csrf=" + "0".repeat(64),
      headers: { "Content-Type": "application/x-www-form-urlencoded" } });
    return res.status;
  }, cfg.aliceJob);
  await alice.page.getByRole("button", { name: "Cancel this job" }).click();
  out.afterCancel = await alice.page.locator("#job-state").textContent();
  await h.shot(alice.page, "signin-4-alice-cancelled");
  return out;
}
