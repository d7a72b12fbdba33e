import Testing
import TetherCore

@_spi(TetherInternal) @testable import TetherDispatch

/// The runner's table of open transports: found by generation, replaced, removed (returned),
/// listed oldest first, their unsent bytes summed, emptied.
struct TransportTableTests {
    final class Fake: Transport {
        let name: String
        let unsentByteCount: Int
        init(_ name: String, unsent: Int = 0) {
            self.name = name
            unsentByteCount = unsent
        }
        func start() {}
        func send(_ bytes: [UInt8]) {}
        func startTLS(serverName: String, bufferedBytes: [UInt8]) {}
        func close() {}
    }

    func name(_ transport: (any Transport)?) -> String? { (transport as? Fake)?.name }

    @Test func findsReplacesAndRemovesByGeneration() {
        let first = TransportGeneration(1)
        let second = TransportGeneration(2)
        let third = TransportGeneration(3)
        var table = TransportTable()
        #expect(table[first] == nil && table.values.isEmpty && table.unsentByteCount == 0)
        table[first] = Fake("a", unsent: 5)
        table[second] = Fake("b", unsent: 7)
        table[third] = Fake("c")
        #expect(name(table[second]) == "b" && name(table[third]) == "c")
        #expect(table.values.map(name) == ["a", "b", "c"])
        #expect(table.unsentByteCount == 12)
        table[second] = Fake("b2", unsent: 1)
        #expect(table.values.map(name) == ["a", "b2", "c"])
        #expect(name(table.remove(first)) == "a")
        #expect(table.remove(first) == nil)
        #expect(table[first] == nil && table.unsentByteCount == 1)
        table[third] = nil
        table[TransportGeneration(9)] = nil
        #expect(table.values.map(name) == ["b2"])
        table.removeAll()
        #expect(table.values.isEmpty && table[second] == nil)
    }
}
