import Testing
import TetherCore
import TetherTestSupport

@testable import TetherXML

/// `releaseBuffersWhileIdle()`: an idle stream gives its memory back and parses on unchanged.
struct ReleaseBuffersTests {
    static let header =
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' xmlns:db='jabber:server:dialback' version='1.0'>"
    static let stanzas = [
        "<message to='a@b'><body>one &amp; two</body></message>",
        "<stream:features><db:x/></stream:features>",
        "<iq type='get' id='1'><ping xmlns='urn:xmpp:ping'/></iq>",
    ]

    /// Releases after every element when it can; the events equal those of a parser that never
    /// releases, for every chunking.
    @Test(arguments: [nil, [1], [3, 7, 11], [64]])
    func releasingBetweenElementsChangesNothing(_ chunks: [Int]?) throws {
        let text = Self.header + Self.stanzas.joined() + Self.stanzas.joined(separator: " ") + "</stream:stream>"
        let bytes = Array(text.utf8)
        let reference = parse(bytes)
        var parser = XMLStreamParser()
        var events: [XMLStreamEvent] = []
        var released = 0
        var offset = 0
        var sizes = (chunks ?? [bytes.count]).makeIterator()
        while offset < bytes.count {
            let end = min(offset + (sizes.next() ?? chunks?.last ?? 1), bytes.count)
            parser.append(bytes.backDeployedSpan.extracting(offset..<end))
            offset = end
            while let event = try parser.next() { events.append(event) }
            if parser.releaseBuffersWhileIdle() {
                released += 1
                let isReleased = parser.buffersReleased
                let hasPending = parser.hasPendingBytes
                #expect(isReleased && !hasPending)
                let next = try parser.next()
                #expect(next == nil)
            }
        }
        #expect(reference.error == nil)
        #expect(events == reference.events)
        if let chunks, chunks.first! < 20 { #expect(released >= 1) }
    }

    @Test func refusesWhenNotIdle() throws {
        var parser = XMLStreamParser()
        let result3 = parser.releaseBuffersWhileIdle()
        #expect(!result3)  // before the header
        parser.append(Array((Self.header + "<message><bo").utf8).backDeployedSpan)
        let result4 = try parser.next()
        #expect(result4 != nil)
        let result5 = try parser.next()
        #expect(result5 == nil)
        let result6 = parser.releaseBuffersWhileIdle()
        #expect(!result6)  // inside an element
        parser.append(Array("dy/></message></stream:stream>".utf8).backDeployedSpan)
        let result7 = try parser.next()
        #expect(result7 != nil)
        let result8 = try parser.next()
        #expect(result8 == .streamClose)
        let result9 = parser.releaseBuffersWhileIdle()
        #expect(!result9)  // after the stream's end
        var failed = XMLStreamParser()
        failed.append(Array((Self.header + "<a></b>").utf8).backDeployedSpan)
        _ = try? failed.next()
        expectThrows(\XMLStreamError.condition, .notWellFormed) { try failed.next() }
        let result10 = failed.releaseBuffersWhileIdle()
        #expect(!result10)
    }

    @Test func restartAndLimitsAfterRelease() throws {
        var parser = XMLStreamParser(configuration: .init(maximumElementSize: 100))
        parser.append(Array(Self.header.utf8).backDeployedSpan)
        while try parser.next() != nil {}
        let result11 = parser.releaseBuffersWhileIdle()
        #expect(result11)
        // The size limit still counts from the element's start, not from the replayed header.
        parser.append(Array("<a>\(String(repeating: "x", count: 80))</a>".utf8).backDeployedSpan)
        let element = try parser.next()
        #expect(element != nil)
        let drained = try parser.next()
        #expect(drained == nil)
        let result13 = parser.releaseBuffersWhileIdle()
        #expect(result13)
        parser.append(Array("<a>\(String(repeating: "x", count: 120))</a>".utf8).backDeployedSpan)
        expectThrows(\XMLStreamError.condition, .policyViolation) { try parser.next() }
        // A restart while released starts a fresh stream.
        var other = XMLStreamParser()
        other.append(Array(Self.header.utf8).backDeployedSpan)
        while try other.next() != nil {}
        let result14 = other.releaseBuffersWhileIdle()
        #expect(result14)
        let result15 = other.restart()
        #expect(result15.isEmpty)
        other.append(Array(Self.header.utf8).backDeployedSpan)
        let reopened = try other.next()
        guard case .streamOpen = reopened else { return #expect(Bool(false)) }
    }
}
