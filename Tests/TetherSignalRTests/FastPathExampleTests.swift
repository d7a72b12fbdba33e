import Testing
import TetherCore
import TetherJSON
import TetherMessagePack
import TetherSignalR
import TetherText

/// The fast-path example of `Specs/fast-paths.md` (as swift-format lays it out), so that it keeps compiling and
/// working.
struct ChatMessage: Codable, Equatable {
    var id: Int
    var text: String

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id = "Id"
        case text = "Text"
    }
}

extension ChatMessage: MessagePackDecodable, JSONDecodable {  // keep Codable as well
    static let keys = CodingKeySet(CodingKeys.self)  // matched without Strings
    init(messagePack reader: inout MessagePackReader) throws {
        var id: Int?
        var text: String?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey(in: Self.keys) {  // a CodingKeys case, or nil
            case .id: id = try reader.readInteger(Int.self)
            case .text: text = try reader.readString()
            case nil: try reader.skipValue()
            }
        }
        guard let id else { throw Self.keys.missingKey(.id) }  // Codable's keyNotFound
        self.init(id: id, text: text ?? "")
    }
    init(json reader: inout JSONReader) throws {  // the same, member by member
        var id: Int?
        var text: String?
        try reader.readObjectStart()
        while reader.nextMember() {
            switch try reader.readKey(in: Self.keys) {
            case .id: id = try reader.readInteger(Int.self)
            case .text: text = try reader.readString()
            case nil: reader.skipValue()
            }
        }
        guard let id else { throw Self.keys.missingKey(.id) }
        self.init(id: id, text: text ?? "")
    }
}

struct FastPathExampleTests {
    @Test(arguments: [ValueEncoding.json, .messagePack])
    func theExampleReadsWhatCodableWrites(_ encoding: ValueEncoding) throws {
        let message = ChatMessage(id: 7, text: "héllo")
        let arguments = try EncodedArguments(encoding: encoding, message)
        #expect(try arguments.decode(ChatMessage.self, at: 0) == message)
        let missing = try EncodedValue(["Text": "no id"], encoding: encoding)
        #expect {
            try missing.decode(ChatMessage.self)
        } throws: { error in
            guard case DecodingError.keyNotFound(let key, _) = error else { return false }
            return key.stringValue == "Id"
        }
    }
}
