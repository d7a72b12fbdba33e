// libFuzzer target: the SCRAM client (RFC 5802 / 7677) fed arbitrary server messages. The first
// byte picks the mechanism, the second the channel binding (none, `y`, bound to tls-exporter
// data) and whether XEP-0474's `h=` is checked (against a fixed list); the rest is the
// server-first message, a zero byte, and the server-final message. Invariants: each step gives its result or a typed SCRAMError; an
// accepted server-first yields a client-final message that carries the server's nonce (which
// must extend the client's) and a proof; a server-final is accepted only with the signature
// the exchange determines, so a fuzzer can never make the client accept one it did not earn.
import FuzzSupport
import TetherCore
import TetherTLS
import TetherXMPP

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let mechanism = SCRAMClient.Mechanism.allCases[Int(input.byte()) % SCRAMClient.Mechanism.allCases.count]
    let options = input.byte()
    let bindings: [SCRAMClient.ChannelBinding] = [
        .none, .serverOfferedNone, .bound(.tlsExporter, data: Array(repeating: 0xA5, count: 32)),
    ]
    let binding = bindings[Int(options % 3)]
    let offered: (mechanisms: [String], channelBindingTypes: [String]?)? =
        options & 4 == 0 ? nil : (["SCRAM-SHA-1", "SCRAM-SHA-256", "PLAIN"], options & 8 == 0 ? nil : ["tls-exporter"])
    let rest = input.rest()
    let cut = rest.firstIndex(of: 0) ?? rest.count
    let serverFirst = Array(rest[..<cut])
    let serverFinal = cut < rest.count ? Array(rest[(cut + 1)...]) : []
    guard
        var client = try? SCRAMClient(
            mechanism: mechanism,
            username: "user",
            password: "pencil",
            nonce: "rOprNGfwEbeRWgbNEkqO",
            hashProvider: OpenSSLHashProvider(),
            limits: .init(minimumIterations: 1, maximumIterations: 64),
            channelBinding: binding,
            offered: offered
        )
    else {
        fatalError("invariant broken: a valid user name and password were refused")
    }
    _ = client.clientFirstMessage
    guard let final = try? client.clientFinalMessage(serverFirst: serverFirst) else { return 0 }
    let text = String(decoding: final, as: UTF8.self)
    let cbind = Base64.encode(
        Array(["n,,", "y,,", "p=tls-exporter,,"][Int(options % 3)].utf8)
            + (options % 3 == 2 ? Array(repeating: 0xA5, count: 32) : [])
    )
    require(
        text.hasPrefix("c=\(cbind),r=rOprNGfwEbeRWgbNEkqO"),
        "the client-final message does not carry the GS2 header and binding, or does not extend the client's nonce"
    )
    require(text.contains(",p="), "the client-final message has no proof")
    if (try? client.verifyServerFinal(serverFinal)) != nil {
        // Only the right signature passes: the fuzzer had to compute HMAC(ServerKey, AuthMessage).
        require(serverFinal.starts(with: Array("v=".utf8)), "a server-final without a verifier was accepted")
    }
    return 0
}
