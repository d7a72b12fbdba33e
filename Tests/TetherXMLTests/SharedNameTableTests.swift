import Dispatch
import Synchronization
import Testing
import TetherCore

@testable import TetherXML

/// The stream parser's trees index one shared name table (`XMLNameTable`) instead of holding
/// their names: a tree's names must stay what they were when the parser later grows the table,
/// empties its cache in the middle of a tree, or starts a new table, on whatever thread the tree
/// is read. (Part of the ThreadSanitizer run: `Tests/Sanitizers/run.sh`.)
struct SharedNameTableTests {
    static let open = RestrictedXMLTests.open

    /// One stanza with many more distinct names than the cache holds: the cache empties in the
    /// middle of the tree while the tree keeps indexing the table, which grows past its limit
    /// and is replaced before the next stanza.
    @Test func aStanzaWithMoreNamesThanTheCacheHolds() throws {
        var text = Self.open + "<big"
        for index in 0..<40 { text += " a\(index)='\(index)'" }
        text += ">"
        for index in 0..<40 { text += "<c\(index) xmlns='urn:c:\(index % 3)' b\(index)='\(index)'/>" }
        text += "</big><small a0='x'><c1/></small>"
        let result = parse(Array(text.utf8), configuration: .init(nameCacheCapacity: 16))
        #expect(result.error == nil)
        let elements = result.events.compactMap { event -> XElement? in
            if case .element(let element) = event { return element }
            return nil
        }
        try #require(elements.count == 2)
        let big = elements[0]
        #expect(big.attributes.map(\.name.local) == (0..<40).map { "a\($0)" })
        #expect(big.attributes.map(\.value) == (0..<40).map { "\($0)" })
        #expect(
            big.children.map(\.name) == (0..<40).map { XMLName("c\($0)", namespace: "urn:c:\($0 % 3)") }
        )
        #expect(big.children.enumerated().map { $1.attribute("b\($0)") } == (0..<40).map { "\($0)" })
        #expect(elements[1].name == XMLName("small", namespace: "jabber:client"))
        #expect(elements[1].attribute("a0") == "x")
        #expect(elements[1].children.map(\.name) == [XMLName("c1", namespace: "jabber:client")])
    }

    /// Trees handed to other threads are read there while the parser goes on adding names to
    /// the table they index (growing it, emptying the cache, starting new tables).
    @Test func treesAreReadOnOtherThreadsWhileTheParserAddsNames() throws {
        let stanzas = 400
        var text = Self.open
        for index in 0..<stanzas {
            text += "<m\(index % 97) xmlns:p='urn:p:\(index % 13)' a\(index % 31)='\(index)' p:b\(index % 7)='x'>"
            text += "<c\(index % 11)/><p:d\(index % 5)>t</p:d\(index % 5)></m\(index % 97)>"
        }
        let bytes = Array(text.utf8)
        let mismatches = Atomic(0)
        let group = DispatchGroup()
        let readers = DispatchQueue(label: "readers", attributes: .concurrent)
        var parser = XMLStreamParser(configuration: .init(nameCacheCapacity: 16))
        var index = 0
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + 61, bytes.count)
            parser.append(bytes.backDeployedSpan.extracting(offset..<end))
            offset = end
            while let event = try parser.next() {
                guard case .element(let element) = event else { continue }
                let number = index
                index += 1
                readers.async(group: group) {
                    var wrong = 0
                    for _ in 0..<20 {
                        if element.name != XMLName("m\(number % 97)", namespace: "jabber:client") { wrong += 1 }
                        if element.attribute("a\(number % 31)") != "\(number)" { wrong += 1 }
                        if element.attribute("b\(number % 7)", namespace: "urn:p:\(number % 13)") != "x" { wrong += 1 }
                        let children = element.children.map(\.name)
                        let expected = [
                            XMLName("c\(number % 11)", namespace: "jabber:client"),
                            XMLName("d\(number % 5)", namespace: "urn:p:\(number % 13)", prefix: "p"),
                        ]
                        if children != expected { wrong += 1 }
                    }
                    mismatches.add(wrong, ordering: .relaxed)
                }
            }
        }
        group.wait()
        #expect(index == stanzas)
        #expect(mismatches.load(ordering: .relaxed) == 0)
    }
}
