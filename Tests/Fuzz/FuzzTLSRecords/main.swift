// libFuzzer target: the sans-IO TLS client (OpenSSL over memory BIOs) fed arbitrary bytes
// where the server's records belong, in the split the first byte picks. Invariants: every
// step returns plaintext or a typed TLSError; no plaintext before the handshake completes
// (which garbage never completes); after an error the session stays failed.
import FuzzSupport
import TetherTLS

/// One context for every input, as the driver shares one per trust setting (making one loads the
/// system trust store, which made a context per input run at a few inputs per second).
let context: TLSContext = {
    guard let context = try? TLSContext() else { fatalError("invariant broken: no TLS context") }
    return context
}()

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let seed = input.byte()
    guard var client = try? TLSClient(serverName: "example.com", context: context) else {
        fatalError("invariant broken: the TLS client could not be made")
    }
    guard (try? client.start()) != nil else { fatalError("invariant broken: the TLS client could not start") }
    let hello = client.takeOutput()
    require(hello.first == 0x16, "the first record is not a handshake record")
    for piece in chunks(of: input.rest(), seed: seed) {
        do {
            let plaintext = try client.receive(Array(piece))
            require(plaintext.isEmpty || client.isEstablished, "plaintext before the handshake completed")
            _ = client.takeOutput()
        } catch {
            require(
                (try? client.receive([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28])) == nil,
                "a failed session accepted more input"
            )
            return 0
        }
    }
    return 0
}
