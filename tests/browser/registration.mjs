// The one-click registration: /setup -> the stand-in's "new App" page -> back with a code ->
// credentials stored -> the App's installation page. Then a forged state is refused.
export default async function (h, cfg) {
  const page = await h.newPage();
  const out = {};
  let r = await page.goto(`${cfg.console}/setup`);
  out.setupStatus = r.status();
  out.setupHasHeading = await page.locator("h1", { hasText: "Register the GitHub App" }).count();
  await h.shot(page, "registration-1-setup");
  await page.getByRole("button", { name: "Register on my account" }).click();
  await page.locator("#create").waitFor();
  out.hookUrl = await page.locator("#hook-url").textContent();
  await h.shot(page, "registration-2-github-new-app");
  await page.locator("#create").click();
  await page.locator("#install").waitFor();
  out.finalUrl = page.url();
  await h.shot(page, "registration-3-installation-page");
  r = await page.goto(`${cfg.console}/setup/callback?code=mc_forged&state=${"a".repeat(64)}`);
  out.forgedStatus = r.status();
  out.forgedText = await page.locator("main").textContent();
  await h.shot(page, "registration-4-wrong-state");
  return out;
}
