/* SPDX-License-Identifier: MIT */
/* cli/doctor.c - `autopatch doctor`: one ✓/✗ line per thing a working install needs
 * (configuration, private key, JWT accepted, installations, the organization permission the
 * console's org: entries need, database, Docker, sandbox image, model),
 * each ✗ followed by the sentence that says how to fix it. Exit 0 only if every check passes.
 *
 * Each check goes through the interface the server itself uses (the GitHub App client, the
 * sandbox engine, the model client), so it reads the same settings with the same defaults.
 * Every network check has a short deadline so a broken setting is reported, not waited on. */
#include "agents/llm.h"
#include "cli/commands.h"
#include "common/buf.h"
#include "common/err.h"
#include "github/api.h"
#include "github/app.h"
#include "github/jwt.h"
#include "github/rest.h"
#include "github/urls.h"
#include "job/environment.h"
#include "sandbox/egress.h"
#include "sandbox/sandbox.h"
#include "server/queue.h"
#include "server/queue_view.h"
#include "server/signin.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CHECK_TIMEOUT_S 10

struct report {
	int failed;
};

static void pass(struct report *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct report *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void pass(struct report *r, const char *name, const char *fmt, ...)
{
	va_list ap;

	(void)r;
	printf("\xe2\x9c\x93 %s", name);
	if (fmt && *fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	putchar('\n');
}

static void fail(struct report *r, const char *name, const char *fmt, ...)
{
	va_list ap;

	r->failed++;
	printf("\xe2\x9c\x97 %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* The last error on one line (libpq's messages span several), without a trailing period so
 * "problem. Fix." reads well when a sentence is embedded. */
static const char *last_error(void)
{
	static __thread char msg[1100];
	size_t n = 0;

	for (const char *p = ap_error_last(); *p && n + 1 < sizeof(msg); p++) {
		bool space = *p == '\n' || *p == '\t' || *p == ' ';

		if (!space)
			msg[n++] = *p;
		else if (n && msg[n - 1] != ' ')
			msg[n++] = ' ';
	}
	msg[n] = '\0';
	while (n && (msg[n - 1] == '.' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	return msg;
}

static void check_config(struct report *r, ap_config *cfg)
{
	const char *id = cfg_str(cfg, "APP_ID");
	ap_buf why = AP_BUF_INIT(4096);
	gh_urls urls;

	if (!id)
		ap_buf_adds(&why, " APP_ID is not set. Set APP_ID in .env to the App ID shown on "
				  "the GitHub App's settings page.");
	else if (strspn(id, "0123456789") != strlen(id) && strncmp(id, "Iv", 2) != 0)
		ap_buf_addf(&why,
			    " APP_ID=%s is neither an App ID nor a client ID. Copy the App ID (a "
			    "number) from the GitHub App's settings page.",
			    id);
	if (!cfg_is_set(cfg, "PRIVATE_KEY_PATH") && !cfg_is_set(cfg, "PRIVATE_KEY"))
		ap_buf_adds(&why, " No private key is configured. Set PRIVATE_KEY_PATH to the .pem "
				  "file downloaded from the GitHub App's settings page (or "
				  "PRIVATE_KEY to its contents).");
	if (!cfg_is_set(cfg, "WEBHOOK_SECRET"))
		ap_buf_adds(&why, " WEBHOOK_SECRET is not set. Set it to the webhook secret "
				  "entered on the GitHub App's settings page (generate one with: "
				  "openssl rand -hex 32).");
	if (gh_urls_get(cfg, &urls))
		ap_buf_addf(&why,
			    " %s. Leave GITHUB_URL and GITHUB_API_URL unset for github.com; for "
			    "GitHub Enterprise Server set GITHUB_URL=https://HOST.",
			    ap_error_last());
	if (why.len)
		fail(r, "configuration", "%s", ap_buf_str(&why) + 1);
	else
		pass(r, "configuration", "APP_ID %s, GitHub %s, API %s", id, urls.web, urls.api);
	ap_buf_release(&why);
}

static bool check_key(struct report *r, ap_config *cfg)
{
	gh_key *key = NULL;

	if (!cfg_is_set(cfg, "PRIVATE_KEY_PATH") && !cfg_is_set(cfg, "PRIVATE_KEY")) {
		fail(r, "private key",
		     "not configured. Set PRIVATE_KEY_PATH to the App's .pem file.");
		return false;
	}
	if (gh_key_load(&key, cfg)) {
		fail(r, "private key", "%s.", last_error());
		return false;
	}
	gh_key_free(key);
	pass(r, "private key", "RSA key loaded from %s",
	     cfg_is_set(cfg, "PRIVATE_KEY_PATH") ? cfg_str(cfg, "PRIVATE_KEY_PATH")
						 : "PRIVATE_KEY");
	return true;
}

/* Whether perms (a "permissions" object of GitHub) grants the organization permission Members. */
static bool has_members(const cJSON *perms)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(perms, "members"));

	return v && (strcmp(v, "read") == 0 || strcmp(v, "write") == 0);
}

/* The installation on account login, or NULL. */
static const cJSON *installation_on(const cJSON *inst, const char *login)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, inst) {
		const char *who = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(it, "account"), "login"));

		if (who && strcasecmp(who, login) == 0)
			return it;
	}
	return NULL;
}

/* The org:NAME entries of AUTOPATCH_CONSOLE_USERS work only when the App, and its
 * installation on NAME, have the organization permission Members (read): the console asks
 * GitHub with the user's token whether they belong to NAME. No line without such entries. */
static void check_console_orgs(struct report *r, ap_config *cfg, const cJSON *me, const cJSON *inst)
{
	const char *cursor = cfg_str(cfg, "AUTOPATCH_CONSOLE_USERS");
	char org[SIGNIN_ORG_MAX + 1];
	ap_buf ok = AP_BUF_INIT(1024), why = AP_BUF_INIT(4096);
	const cJSON *on;

	while (signin_next_org(&cursor, org, sizeof(org))) {
		if (!has_members(cJSON_GetObjectItemCaseSensitive(me, "permissions")))
			ap_buf_addf(
			    &why,
			    " AUTOPATCH_CONSOLE_USERS names org:%s, but the App lacks the "
			    "organization permission Members (read), so GitHub will not tell "
			    "the console who belongs to %s. On the App's settings page, "
			    "Permissions: Organization permissions, set Members to Read-only and "
			    "save; the organization's owner then accepts it (Apps registered "
			    "from deploy/app.yml ask for it).",
			    org, org);
		else if (!(on = installation_on(inst, org)))
			ap_buf_addf(
			    &why,
			    " AUTOPATCH_CONSOLE_USERS names org:%s, but the App is not installed "
			    "on %s, so the console cannot ask who belongs to it. Install the App "
			    "on %s.",
			    org, org, org);
		else if (!has_members(cJSON_GetObjectItemCaseSensitive(on, "permissions")))
			ap_buf_addf(
			    &why,
			    " The App's installation on %s has not accepted the permission "
			    "Members (read). An owner of %s accepts it in the organization's "
			    "settings, GitHub Apps, the App's \"Review request\".",
			    org, org);
		else
			ap_buf_addf(&ok, "%sorg:%s", ok.len ? ", " : "", org);
	}
	if (why.len)
		fail(r, "console organizations", "%s", ap_buf_str(&why) + 1);
	else if (ok.len)
		pass(r, "console organizations", "Members (read) granted for %s", ap_buf_str(&ok));
	ap_buf_release(&ok);
	ap_buf_release(&why);
}

static void check_github(struct report *r, ap_config *cfg, bool usable)
{
	gh_app *app = NULL;
	gh_rest *rest = NULL;
	cJSON *me = NULL, *inst = NULL, *it;
	const char *slug;
	ap_buf who = AP_BUF_INIT(1024);
	int rc, n;

	if (!usable || gh_app_new(&app, cfg)) {
		fail(r, "JWT accepted",
		     "not checked. Fix the configuration and private key lines first%s%s.",
		     usable ? ": " : "", usable ? last_error() : "");
		fail(r, "installations visible",
		     "not checked. Fix the configuration and private key lines above first.");
		return;
	}
	rc = gh_rest_new(&rest, cfg, gh_app_creds(app), 0);
	if (!rc)
		rc = gh_rest_call(rest, "GET", "/app", NULL, &me);
	if (rc == AP_EDENIED || rc == AP_ENOTFOUND) {
		fail(r, "JWT accepted",
		     "%s. Check that APP_ID is this App's ID, PRIVATE_KEY_PATH is this App's "
		     "current key (generate a new one on the App's settings page if unsure), and "
		     "that this machine's clock is right.",
		     last_error());
	} else if (rc) {
		fail(r, "JWT accepted",
		     "%s. Check GITHUB_API_URL and that this machine can reach it (proxy, "
		     "firewall, DNS).",
		     last_error());
	}
	if (rc) {
		fail(r, "installations visible", "not checked. Fix the JWT line above first.");
		goto out;
	}
	slug = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(me, "slug"));
	pass(r, "JWT accepted", "GitHub App \"%s\"", slug ? slug : "?");

	rc = gh_rest_get_all(rest, "/app/installations", 1000, &inst);
	if (rc) {
		fail(r, "installations visible",
		     "%s. Check GITHUB_API_URL and the App's permissions.", last_error());
		goto out;
	}
	n = cJSON_GetArraySize(inst);
	if (n == 0) {
		fail(r, "installations visible",
		     "the App is installed nowhere. Install it on the repositories it should fix "
		     "(the App's public page, \"Install App\").");
		goto out;
	}
	cJSON_ArrayForEach (it, inst) {
		const char *login = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(it, "account"), "login"));

		if (who.len > 200)
			break;
		ap_buf_addf(&who, "%s%s", who.len ? ", " : "", login ? login : "?");
	}
	pass(r, "installations visible", "%d (%s)", n, ap_buf_str(&who));
	check_console_orgs(r, cfg, me, inst);
out:
	ap_buf_release(&who);
	cJSON_Delete(me);
	cJSON_Delete(inst);
	gh_rest_free(rest);
	gh_app_free(app);
}

/* The commands a flavour's image must have (docs/environments.md). */
static const char *flavor_tools(const char *flavor)
{
	static const struct {
		const char *flavor, *tools;
	} t[] = {
	    {"python", "python3 python pip3 pytest"},
	    {"node", "node npm"},
	    {"go", "go"},
	    {"rust", "cargo rustc"},
	    {"java", "java mvn"},
	    {"c", "gcc make cmake"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(t[i].flavor, flavor) == 0)
			return t[i].tools;
	return "sh";
}

/* Every flavour that is built must run a box with its toolchain, and is listed with the
 * versions its labels give; one not built is only named (it is built on first use, unless
 * AUTOPATCH_SANDBOX_BUILD=off, or by build.sh --flavor NAME). */
static void check_flavors(struct report *r, const ap_config *cfg, sbx_engine *e)
{
	bool on_first_use = true;

	if (cfg_bool(cfg, "AUTOPATCH_SANDBOX_BUILD", &on_first_use) != 0)
		ap_error_clear();
	for (size_t i = 0; env_flavors[i]; i++) {
		const char *fl = env_flavors[i], *tools = flavor_tools(fl);
		char image[256], name[64], script[256], versions[300];
		const char *argv[] = {"sh", "-c", script, NULL};
		sbx_spec spec = SBX_SPEC_INIT;
		sbx_cmd cmd = SBX_CMD_INIT;
		sbx_result res = SBX_RESULT_INIT;
		sbx_box *b = NULL;
		int rc;

		snprintf(name, sizeof(name), "flavour %s", fl); /* a flavour: a short name */
		if (env_flavor_image(cfg, fl, image, sizeof(image))) {
			fail(r, name, "%s.", last_error());
			continue;
		}
		rc = sbx_image_present(e, image);
		if (rc == AP_ENOTFOUND) {
			ap_error_clear();
			printf("- %s: %s not built (%sdeploy/sandbox-image/build.sh --flavor %s)\n",
			       name, image,
			       on_first_use ? "built on first use, or now with "
					    : "AUTOPATCH_SANDBOX_BUILD=off: build it with ",
			       fl);
			continue;
		}
		if (rc) {
			fail(r, name, "asking Docker about %s failed (%s).", image, last_error());
			continue;
		}
		snprintf(
		    script, sizeof(script),
		    "for t in %s; do command -v \"$t\" >/dev/null || { echo \"$t\"; exit 1; }; "
		    "done",
		    tools);
		spec.image = image;
		spec.job_label = "doctor";
		cmd.argv = argv;
		cmd.timeout_s = CHECK_TIMEOUT_S;
		rc = sbx_create(e, &spec, &b);
		if (rc == 0)
			rc = sbx_exec(b, &cmd, &res);
		if (rc)
			fail(r, name, "a box of %s did not start (%s).", image, last_error());
		else if (res.exit_code != 0)
			fail(r, name,
			     "%s lacks `%.40s`. Rebuild it: deploy/sandbox-image/build.sh --flavor "
			     "%s.",
			     image, res.out && res.out[0] ? strtok(res.out, "\n") : "?", fl);
		else {
			env_image_toolchain(e, image, versions, sizeof(versions));
			pass(r, name, "%s (%s)%s%s", image, tools, versions[0] ? ": " : "",
			     versions);
		}
		sbx_result_release(&res);
		if (sbx_destroy(b) != 0)
			ap_error_clear();
	}
}

/* The queue's database (AUTOPATCH_DB), opened as `autopatch serve` opens it: a PostgreSQL
 * server that answers and takes the migrations, or a SQLite file that opens for writing. A
 * SQLite file not created yet passes when its folder is writable (the server creates it). */
static void check_database(struct report *r, ap_config *cfg)
{
	const char *db = cfg_str(cfg, "AUTOPATCH_DB");
	char dir[4096];
	const char *slash;
	queue *q = NULL;
	q_stats st;
	int version = 0, rc;

	rc = q_open(&q, db, Q_OPEN_EXISTING);
	if (rc == AP_ENOTFOUND) {
		slash = strrchr(db, '/');
		if (!slash)
			snprintf(dir, sizeof(dir), ".");
		else if (ap_fmt(dir, sizeof(dir), "%.*s", slash == db ? 1 : (int)(slash - db),
				db)) {
			ap_error_clear(); /* a cut folder would be another folder to check */
			fail(r, "database", "AUTOPATCH_DB's folder is longer than %zu bytes.",
			     sizeof(dir) - 1);
			return;
		}
		if (access(dir, W_OK | X_OK) == 0)
			pass(r, "database",
			     "%s (sqlite) does not exist yet; autopatch serve creates it", db);
		else
			fail(
			    r, "database",
			    "%s does not exist and its folder %s is not writable by this user. Set "
			    "AUTOPATCH_DB to a path in a writable folder, or a postgresql:// URI.",
			    db, dir);
		return;
	}
	if (rc == AP_EUNAVAIL) {
		fail(r, "database",
		     "%s. Start PostgreSQL or fix AUTOPATCH_DB "
		     "(postgresql://USER:PASSWORD@HOST:PORT/"
		     "DB); the server must accept this host (listen_addresses, pg_hba.conf).",
		     last_error());
		return;
	}
	if (rc) {
		fail(r, "database",
		     "%s. Set AUTOPATCH_DB to a SQLite file this user may write, or to a "
		     "postgresql:// URI; a schema newer than this build needs a newer autopatch.",
		     last_error());
		return;
	}
	if (q_schema_version(q, &version) || q_get_stats(q, &st)) {
		fail(r, "database", "%s. Check the database server's log.", last_error());
		q_close(q);
		return;
	}
	pass(r, "database", "%s, schema version %d, %lld queued and %lld running job(s)%s",
	     q_backend(q), version, (long long)st.queued, (long long)st.running,
	     q_shared(q) ? " (shared by every replica)" : "");
	q_close(q);
}

/* AUTOPATCH_SETUP_CA_FILE (docs/environments.md, "CA bundle"). When it is bad, the setting is
 * dropped from cfg afterwards, so the Docker check below reports Docker, not the bundle
 * again (the engine refuses to start with a bad one). */
static void check_setup_ca(struct report *r, ap_config *cfg)
{
	const char *path = cfg_str(cfg, "AUTOPATCH_SETUP_CA_FILE");
	int n = 0;

	if (!path)
		return;
	if (sbx_setup_ca_read(cfg, NULL, &n)) {
		fail(r, "setup CA bundle", "%s.", last_error());
		cfg_set(cfg, "AUTOPATCH_SETUP_CA_FILE", "");
		return;
	}
	pass(r, "setup CA bundle",
	     "%d certificate%s in %s, trusted by setup besides the public CAs", n,
	     n == 1 ? "" : "s", path);
}

static void check_docker(struct report *r, ap_config *cfg)
{
	sbx_engine *e = NULL;
	const char *image;
	char cap[512];
	int rc;

	rc = sbx_engine_new(&e, cfg);
	if (rc == AP_EINVAL) { /* a sandbox setting is wrong: its sentence says which */
		fail(r, "Docker reachable", "not checked: %s.", last_error());
		fail(r, "sandbox image present", "not checked. Fix the line above first.");
		return;
	}
	if (rc) {
		fail(r, "Docker reachable",
		     "%s. Start dockerd (or point DOCKER_HOST at it) and make sure this user may "
		     "use its socket (the docker group).",
		     last_error());
		fail(r, "sandbox image present", "not checked. Fix the Docker line above first.");
		return;
	}
	pass(r, "Docker reachable", "%s", cfg_str(cfg, "DOCKER_HOST"));
	/* What a box can hold: files in its tmpfs mounts count against its memory. */
	if (sbx_engine_capacity(e, cap, sizeof(cap)) == 0)
		printf("- box size: %s\n", cap);
	image = sbx_engine_image(e);
	rc = sbx_image_present(e, NULL);
	if (!rc)
		pass(r, "sandbox image present", "%s", image);
	else if (rc == AP_ENOTFOUND)
		fail(r, "sandbox image present",
		     "%s is not in Docker. Build the sandbox image with "
		     "deploy/sandbox-image/build.sh (scripts/bootstrap.sh runs it; it tags %s, the "
		     "default), or set AUTOPATCH_SANDBOX_IMAGE to an image Docker has.",
		     image, cfg_setting_find("AUTOPATCH_SANDBOX_IMAGE")->def);
	else
		fail(r, "sandbox image present",
		     "asking Docker about %s failed (%s). Check that dockerd is healthy.", image,
		     last_error());
	check_flavors(r, cfg, e);
	sbx_engine_free(e);
}

static void check_model(struct report *r, ap_config *cfg)
{
	llm *m = NULL;
	int rc;

	if (llm_new(&m, cfg)) {
		fail(r, "model endpoint reachable", "%s.", last_error());
		return;
	}
	rc = llm_probe(m, CHECK_TIMEOUT_S, NULL);
	if (!rc)
		pass(r, "model endpoint reachable", "%s (%s)", llm_models_url(m), llm_describe(m));
	else if (rc == AP_EDENIED)
		fail(r, "model endpoint reachable",
		     "%s. Set AUTOPATCH_LLM_API_KEY (or the provider's OPENAI_API_KEY / "
		     "ANTHROPIC_API_KEY) to a valid key for this endpoint.",
		     last_error());
	else if (rc == AP_EHTTP)
		fail(r, "model endpoint reachable",
		     "%s. Check AUTOPATCH_LLM_BASE_URL (for OpenAI-compatible servers it usually "
		     "ends in /v1) and AUTOPATCH_LLM_PROVIDER.",
		     last_error());
	else
		fail(r, "model endpoint reachable",
		     "%s. Start the model server or fix AUTOPATCH_LLM_BASE_URL.", last_error());
	llm_free(m);
}

/* An address GitHub cannot reach from the internet: loopback, private, link-local, shared
 * (CGNAT), unspecified, IPv6 unique-local. */
static bool unreachable_from_outside(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);

		return (a >> 24) == 127 || (a >> 24) == 10 || (a >> 24) == 0 ||
		       (a >> 20) == (172u << 4 | 1) || (a >> 16) == (192u << 8 | 168) ||
		       (a >> 16) == (169u << 8 | 254) || (a >> 22) == (100u << 2 | 1);
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) ||
		       IN6_IS_ADDR_LINKLOCAL(a) || (a->s6_addr[0] & 0xfe) == 0xfc ||
		       (IN6_IS_ADDR_V4MAPPED(a) && (a->s6_addr[12] == 127 || a->s6_addr[12] == 10));
	}
	return false;
}

/* Whether GitHub can deliver to AUTOPATCH_PUBLIC_URL, as far as this host can tell: the URL's
 * host must resolve, and to at least one address that is not loopback or private. A check
 * from inside cannot prove the outside reaches it (firewalls, NAT), only rule it out. */
static void check_public_url(struct report *r, ap_config *cfg)
{
	const char *url = cfg_str(cfg, "AUTOPATCH_PUBLIC_URL"), *h, *end;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *ai;
	char host[256], addr[INET6_ADDRSTRLEN] = "";
	bool outside = false;
	int rc;

	if (!url)
		return; /* only the registration at /setup needs it */
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0) {
		fail(r, "public URL",
		     "AUTOPATCH_PUBLIC_URL=%s is not an http(s) URL. Set it to the URL GitHub "
		     "reaches this server at (https://autopatch.example.org).",
		     url);
		return;
	}
	h = strstr(url, "://") + 3;
	if (*h == '[') {
		end = strchr(++h, ']');
	} else {
		end = h + strcspn(h, ":/?#");
	}
	if (!end || end == h || (size_t)(end - h) >= sizeof(host)) {
		fail(r, "public URL", "AUTOPATCH_PUBLIC_URL=%s has no host name.", url);
		return;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(end - h), h);
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc != 0) {
		fail(r, "public URL",
		     "%s (from AUTOPATCH_PUBLIC_URL) does not resolve here (%s), so GitHub "
		     "cannot reach it either. Fix the name or its DNS record.",
		     host, gai_strerror(rc));
		return;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		if (!unreachable_from_outside(ai->ai_addr))
			outside = true;
		else if (!addr[0])
			getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr), NULL, 0,
				    NI_NUMERICHOST);
	}
	freeaddrinfo(res);
	if (!outside)
		fail(r, "public URL",
		     "%s (from AUTOPATCH_PUBLIC_URL) resolves to %s, a loopback or private "
		     "address: GitHub cannot deliver webhooks there from outside. Publish the "
		     "server (a reverse proxy with a public name), or on a laptop forward a "
		     "smee.io channel with smee-client (README \"Webhooks on a laptop\").",
		     host, addr);
	else if (strncmp(url, "http://", 7) == 0)
		pass(r, "public URL",
		     "%s resolves to a public address (GitHub sends the secret's signature over "
		     "plain HTTP: prefer https)",
		     host);
	else
		pass(r, "public URL", "%s resolves to a public address", host);
}

int doctor_main(int argc, char **argv, ap_config *cfg)
{
	struct report r = {0};
	bool key_ok;

	if (argc > 1) {
		fprintf(stderr, "usage: autopatch doctor (takes no arguments; %s)\n", argv[1]);
		return 2;
	}
	/* Diagnose quickly: one retry and a short deadline instead of the server's patience. */
	if (!cfg_is_set(cfg, "AUTOPATCH_GH_DEADLINE_S"))
		cfg_set(cfg, "AUTOPATCH_GH_DEADLINE_S", "15");
	if (!cfg_is_set(cfg, "AUTOPATCH_GH_RETRIES"))
		cfg_set(cfg, "AUTOPATCH_GH_RETRIES", "1");
	if (!cfg_is_set(cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S"))
		cfg_set(cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S", "5");

	check_config(&r, cfg);
	check_public_url(&r, cfg);
	key_ok = check_key(&r, cfg);
	check_github(&r, cfg, key_ok && cfg_is_set(cfg, "APP_ID"));
	check_database(&r, cfg);
	check_setup_ca(&r, cfg);
	check_docker(&r, cfg);
	check_model(&r, cfg);
	fflush(stdout);
	if (r.failed)
		printf("%d check%s failed.\n", r.failed, r.failed == 1 ? "" : "s");
	else
		printf("All checks passed.\n");
	return r.failed ? 1 : 0;
}
