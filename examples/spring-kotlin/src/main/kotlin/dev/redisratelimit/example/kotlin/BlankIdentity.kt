package dev.redisratelimit.example.kotlin

import jakarta.servlet.FilterChain
import jakarta.servlet.http.HttpServletRequest
import jakarta.servlet.http.HttpServletRequestWrapper
import jakarta.servlet.http.HttpServletResponse
import org.springframework.stereotype.Component
import org.springframework.web.filter.OncePerRequestFilter
import java.util.Collections
import java.util.Enumeration

/**
 * An identity header sent empty (`X-Api-Key:`) is a missing identity: 401, as
 * the other example apps answer (the Java example's BlankIdentity), where
 * Spring alone binds "" and the starter answers 400 for an empty key. The
 * header is hidden, so Spring's missing-header path ([MissingIdentity]) answers.
 */
@Component
class BlankIdentity : OncePerRequestFilter() {

    override fun shouldNotFilter(request: HttpServletRequest): Boolean = IDENTITY.none { blank(request, it) }

    override fun doFilterInternal(request: HttpServletRequest, response: HttpServletResponse, chain: FilterChain) {
        chain.doFilter(object : HttpServletRequestWrapper(request) {
            private fun hidden(name: String?) = name != null && name.lowercase() in IDENTITY && blank(request, name)

            override fun getHeader(name: String?): String? = if (hidden(name)) null else super.getHeader(name)

            override fun getHeaders(name: String?): Enumeration<String> =
                if (hidden(name)) Collections.emptyEnumeration() else super.getHeaders(name)

            override fun getHeaderNames(): Enumeration<String> =
                Collections.enumeration(Collections.list(super.getHeaderNames()).filterNot { hidden(it) })
        }, response)
    }

    private companion object {
        val IDENTITY = setOf("x-api-key", "x-user")

        fun blank(request: HttpServletRequest, name: String): Boolean = request.getHeader(name)?.isBlank() ?: false
    }
}
