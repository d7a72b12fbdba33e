import CEventPoll

/// Random words from the system's secure generator, read 32 at a time: a WebSocket connection's
/// masks (one per frame it sends; RFC 6455 §10.3 wants masks no one can predict) cost one system
/// call per 32 frames instead of one each (`SystemRandomNumberGenerator` makes a `getrandom` call
/// per word). Where the block cannot be had, a word comes from `SystemRandomNumberGenerator`.
final class SystemRandomWords: Sendable {
    private struct Block {
        var words = [UInt64](repeating: 0, count: SystemRandomWords.blockSize)
        /// The next unused word (`blockSize`: none left).
        var next = SystemRandomWords.blockSize
    }

    static let blockSize = 32

    private let block = PThreadLocked(Block())

    /// The next word.
    func next() -> UInt64 {
        block.withLock { block in
            if block.next == Self.blockSize {
                let filled = block.words.withUnsafeMutableBytes { tether_random_bytes($0.baseAddress, $0.count) == 0 }
                guard filled else {
                    var generator = SystemRandomNumberGenerator()
                    return generator.next()
                }
                block.next = 0
            }
            defer { block.next += 1 }
            return block.words[block.next]
        }
    }
}
