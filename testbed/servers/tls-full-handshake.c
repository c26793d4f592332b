/* seeds/001 and 004: a Gemini server (TLS, OpenSSL) that makes every connection pay for a full
 * handshake: session cache and tickets off, so resumption offered by the client is refused, and
 * an RSA 3072 key, whose private-key operation (~1.8 ms here) dwarfs serving a 1 KB file.
 * Twin: tls-resumed. */
#include "tls.h"

static const struct tls_server srv = {.name = "tls-full-handshake", .rsa_bits = 3072};

int main(int argc, char **argv)
{
    return tls_gemini_run(argc, argv, &srv);
}
