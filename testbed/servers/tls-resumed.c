/* The twin of tls-full-handshake: session tickets on, so returning clients resume (a PSK
 * handshake, no certificate signature), and an ECDSA P-256 key for the full handshakes. */
#include "tls.h"

static const struct tls_server srv = {.name = "tls-resumed", .rsa_bits = 0, .resume = 1};

int main(int argc, char **argv)
{
    return tls_gemini_run(argc, argv, &srv);
}
