import Testing

@testable import TetherDispatch

/// `SystemRandomWords` (a WebSocket connection's masks): words from the system's generator, a
/// block at a time, none handed out twice, across several blocks and from several threads.
struct SystemRandomWordsTests {
    @Test func wordsAcrossBlocksAreAllDifferent() {
        let random = SystemRandomWords()
        let words = (0..<(SystemRandomWords.blockSize * 5 + 3)).map { _ in random.next() }
        #expect(Set(words).count == words.count)
        // Each bit position varies (a zeroed or stuck block would not).
        let ored = words.reduce(0, |)
        let anded = words.reduce(~0, &)
        #expect(ored == ~0)
        #expect(anded == 0)
    }

    @Test func threadsSharingOneSourceGetDifferentWords() async {
        let random = SystemRandomWords()
        let words = await withTaskGroup(of: [UInt64].self) { group in
            for _ in 0..<4 {
                group.addTask { (0..<100).map { _ in random.next() } }
            }
            var all: [UInt64] = []
            for await part in group { all += part }
            return all
        }
        #expect(words.count == 400)
        #expect(Set(words).count == 400)
    }
}
