/* SPDX-License-Identifier: MIT */
/* cli/setup.c - `autopatch setup`: print the URL of the one-click App registration page
 * (/setup on the admin listener). When no server answers on the admin listener, start one in
 * registration mode (`serve` that may start without a webhook secret or App: every delivery
 * is refused until the registration stored one, and the workers start with the new App),
 * which then keeps running as the server. */
#include "cli/commands.h"
#include "common/err.h"
#include "server/listen.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Whether something accepts connections at the admin listener's address. */
static bool answers(const listen_spec *at)
{
	int fd = socket(at->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	ok = connect(fd, (const struct sockaddr *)&at->addr, at->addr_len) == 0;
	close(fd);
	return ok;
}

int setup_main(int argc, char **argv, ap_config *cfg)
{
	listen_spec at;
	char url[256];

	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "autopatch: setup takes no arguments; it is configured by .env and "
				"the environment\n");
		return 2;
	}
	if (listen_parse(&at, "AUTOPATCH_ADMIN_LISTEN", cfg_str(cfg, "AUTOPATCH_ADMIN_LISTEN")) ||
	    serve_console_url(cfg, &at, url, sizeof(url))) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		return 2;
	}
	if (at.kind == LISTEN_OFF) {
		fprintf(stderr,
			"autopatch: AUTOPATCH_ADMIN_LISTEN=off: the registration page is on "
			"the admin listener; set it to 127.0.0.1:9464\n");
		return 2;
	}
	if (!cfg_is_set(cfg, "AUTOPATCH_PUBLIC_URL")) {
		fprintf(stderr, "autopatch: AUTOPATCH_PUBLIC_URL is not set: set it to the URL "
				"GitHub reaches this server at (https://autopatch.example.org, or "
				"your smee.io channel; see README \"Webhooks on a laptop\")\n");
		return 2;
	}
	if (!url[0]) {
		fprintf(stderr,
			"autopatch: the admin listener is %s: forward it to a local port "
			"(ssh -L 9464:%s HOST) and set AUTOPATCH_CONSOLE_URL to "
			"http://127.0.0.1:9464\n",
			at.text, at.text + 5);
		return 2;
	}
	printf("Register the GitHub App: open %s/setup in your browser\n", url);
	fflush(stdout);
	if (at.kind == LISTEN_TCP && answers(&at))
		return 0;
	printf("No server answers on %s yet: starting `autopatch serve` in registration mode "
	       "(Ctrl-C stops it)\n",
	       at.text);
	fflush(stdout);
	return serve_run(cfg, true);
}
