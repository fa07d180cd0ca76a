/// Who is calling, once authenticated: the configured id of a static token, or the `sub` claim of a JWT
/// (RFC 7519 section 4.1.2), qualified by its issuer when more than one issuer is accepted, since a subject is
/// only unique within one issuer (RFC 7519 section 4.1.2: "locally unique in the context of the issuer").
package struct Identity: Sendable, Hashable, CustomStringConvertible {
    /// Which mechanism authenticated the caller.
    package enum Kind: String, Sendable, Hashable {
        case staticToken = "static"
        case jwt
    }

    package var id: String
    package var kind: Kind
    /// The JWT's `iss` when several issuers are accepted, so two issuers' users never share a key; nil with a
    /// single issuer (the subject alone is unique) and for static tokens.
    package var issuer: String?

    package init(id: String, kind: Kind, issuer: String? = nil) {
        self.id = id
        self.kind = kind
        self.issuer = issuer
    }

    /// What rate limits count by and logs show: `static:<id>`, `jwt:<sub>`, or `jwt:<iss>|<sub>` with several
    /// issuers. Unambiguous, because a configured issuer cannot contain "|".
    package var key: String {
        if let issuer { return "\(kind.rawValue):\(issuer)|\(id)" }
        return "\(kind.rawValue):\(id)"
    }

    package var description: String { key }
}
